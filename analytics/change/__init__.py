"""Before and after a change of the pool's policy: the what-if proves itself on the user's cluster.

- :mod:`.record`: a change as a fact in the store (the ``changes`` table), recorded by the user;
- :mod:`.candidates`: changes Tidelens sees in the data, each with its evidence, for the user to
  confirm (never recorded without them);
- :mod:`.basis`: the whole span's timelines, events and Kueue signals, built once, that every
  before/after is cut from;
- :mod:`.compare`: the two periods measured by the same definitions, raw and per million requests;
- :mod:`.score`: the what-if's prediction from the before-period and the after-period's replay,
  against what happened.
"""

from __future__ import annotations

from analytics.change.record import PolicyChange, apply_change, list_changes, parse_window, record_change

__all__ = ["PolicyChange", "apply_change", "list_changes", "parse_window", "record_change"]
