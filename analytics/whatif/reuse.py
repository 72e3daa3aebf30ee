"""A slider step replays only the policies the moved parameter changes.

Most of the What-if's decisions are read by one or two policies: the polite release hour by the
polite policy alone, the tidal window by the tidal and MIG policies, the reservation and its
headroom by the partitioned and MIG policies (:func:`analytics.whatif.policies.reservation`).
:func:`compare_reusing` keys each policy's replay by what that policy reads
(:func:`policy_fingerprint`: the scenario's fingerprint with the parameters it never reads set to
their defaults) and keeps the newest replays in this process, so moving the tidal slider replays
two policies and reads the other five. ``tests/test_whatif_reuse.py`` holds the table below to
the model: a parameter changed for a policy that does not read it leaves its result equal.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict

from analytics.whatif.outputs import PolicyResult, compare
from analytics.whatif.params import PoolParams, PoolScenario

# The pool parameters only some policies read (every other parameter is read by all of them).
READ_ONLY_BY: dict[str, frozenset[str]] = {
    "polite_release_hour": frozenset({"polite"}),
    "tidal_start_hour": frozenset({"tidal", "mig"}),
    "tidal_end_hour": frozenset({"tidal", "mig"}),
    "mig_profile": frozenset({"mig"}),
    "mig_resplit_drain_min": frozenset({"mig"}),
    "gpu_model": frozenset({"mig"}),
    # The one reservation (and class B beside it) is what the partitioned and MIG pools give inference.
    "reservation_gpus": frozenset({"partitioned", "mig"}),
    "headroom": frozenset({"partitioned", "mig"}),
    "split_b": frozenset({"partitioned", "mig"}),
    "spot_interruptions_per_h": frozenset({"partitioned"}),
    # Co-location slows inference only where it shares GPUs: class B and time-slicing.
    "timeslice_replicas": frozenset({"timeslice"}),
    "timeslice_interference": frozenset({"partitioned", "timeslice"}),
}
KEPT = 64
_DEFAULTS = PoolParams()
_KEPT: OrderedDict[tuple[str, str], PolicyResult] = OrderedDict()
_LOCK = threading.Lock()


def policy_fingerprint(scn: PoolScenario, policy: str) -> str:
    """The fingerprint of what ``policy``'s replay of ``scn`` reads: equal for two scenarios that
    differ only in parameters the policy never reads."""
    unread = {name: getattr(_DEFAULTS, name) for name, readers in READ_ONLY_BY.items()
              if policy not in readers}
    return dataclasses.replace(scn, pool=dataclasses.replace(scn.pool, **unread)).fingerprint()


def compare_reusing(scn: PoolScenario, policies: tuple[str, ...]) -> dict[str, PolicyResult]:
    """:func:`analytics.whatif.outputs.compare`'s results, each policy replayed only when what it
    reads changed since one of the last :data:`KEPT` replays (the results are shared, never to be
    changed in place)."""
    keys = {p: (p, policy_fingerprint(scn, p)) for p in policies}
    with _LOCK:
        found = {p: _KEPT[k] for p, k in keys.items() if k in _KEPT}
    missing = tuple(p for p in policies if p not in found)
    if missing:
        fresh = compare(scn, missing)
        with _LOCK:
            for p in missing:
                _KEPT[keys[p]] = found[p] = fresh[p]
            while len(_KEPT) > KEPT:
                _KEPT.popitem(last=False)
    return {p: found[p] for p in policies}
