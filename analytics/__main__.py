"""``python -m analytics`` is the ``tidelens`` command."""

import sys

from analytics.cli import main

sys.exit(main())
