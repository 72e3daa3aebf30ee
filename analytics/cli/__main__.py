"""``python -m analytics.cli``: the ``tidelens`` command without its console script."""

import sys

from analytics.cli import main

sys.exit(main())
