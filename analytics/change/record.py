"""A change of the pool's policy as a fact in the store: what the user says happened, and when.

A :class:`PolicyChange` is a time, the policy it enacted (one of :data:`analytics.whatif.POLICIES`)
and that policy's parameters (reservation GPUs, release hour, tidal window, MIG profile,
replicas per GPU). It lives in the store's ``changes`` table (:mod:`analytics.sql.changes`,
registered with the catalog check of :mod:`analytics.store_file`): recording the same time and
policy again replaces its parameters and adds nothing. Candidates Tidelens sees in the data
(:mod:`analytics.change.candidates`) become changes only when the user records them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from analytics.errors import ConfigError
from analytics.fieldhelp import out_of_bounds
from analytics.sql import changes as q
from analytics.times import iso_utc
from analytics.whatif.params import PoolParams
from analytics.whatif.policies import POLICIES

if TYPE_CHECKING:
    from analytics.store import Store
    from analytics.whatif.params import PoolScenario

_MIG = re.compile(r"^\d+g\.\d+gb$")
_HOUR = r"(\d{1,2})(?::([0-5]\d))?"  # minutes 00-59: 21:75 is no time (it read as 22:15)
_WINDOW = re.compile(rf"^\s*{_HOUR}\s*-\s*{_HOUR}\s*$")


def _f(default: Any, text: str, **extra: Any) -> Any:
    return field(default=default, metadata={"help": text, **extra})


@dataclass(frozen=True)
class PolicyChange:
    """One change of the pool's policy (the ``changes`` table's row)."""

    at_ms: int = _f(0, "when the policy took effect (UTC epoch ms; typed as ISO-8601, epoch seconds or now-7d)")
    policy: str = _f("partitioned", "the policy it enacted (shared, polite, preemption, tidal, partitioned, mig, timeslice)")
    reservation_gpus: int | None = _f(None, "GPUs reserved for inference that batch never touches "
                                            "(partitioned, MIG: the class A reservation)", min=0, max=100_000,
                                      unit="GPUs")
    release_hour: float | None = _f(None, "polite: the hour (UTC) batch releases its GPUs", min=0.0, max=23.99, unit="h")
    tidal_window: tuple[float, float] | None = _f(None, "tidal / MIG: the hours (UTC) batch is admitted in, "
                                                        "START-END (22-8 crosses midnight); drained at END")
    mig_profile: str | None = _f(None, "MIG: the profile inference runs on, e.g. 3g.40gb")
    replicas_per_gpu: int | None = _f(None, "time-slicing: pods sharing one GPU (the device plugin's replicas)",
                                      min=2, max=16, unit="pods")
    note: str = _f("", "what the change was, in the user's words")
    source: str = _f("user", "who recorded it: the CLI, the What-if page, or a candidate the user confirmed")

    def validate(self) -> "PolicyChange":
        """The change itself; ``ConfigError`` naming the field and what to give otherwise."""

        if self.policy not in POLICIES:
            raise ConfigError(f"change policy {self.policy!r}: choose one of {', '.join(POLICIES)}")
        for f, v in out_of_bounds(self):  # the fields' own min and max (NaN and infinity outside them)
            raise ConfigError(f"change --{f.name.replace('_', '-')} {v:g}: give {f.metadata['min']:g} to "
                              f"{f.metadata['max']:g} {f.metadata['unit']}")
        for h in self.tidal_window or ():
            if not 0.0 <= h < 24.0:
                raise ConfigError(f"change --tidal-window {h:g}: give an hour from 0 to 23.99")
        if self.mig_profile is not None and not _MIG.match(self.mig_profile):
            raise ConfigError(f"change --mig-profile {self.mig_profile!r}: write a MIG profile such as 3g.40gb")
        return self

    def parameters(self) -> dict[str, Any]:
        """The policy's parameters the user gave (none given: the what-if's defaults stand)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("at_ms", "policy", "note", "source") and getattr(self, f.name) is not None}

    def describe(self) -> str:
        """The change in words, e.g. ``partitioned from 2026-10-12T00:00:00Z (reservation_gpus 28)``."""

        params = ", ".join(f"{k} {_show(v)}" for k, v in self.parameters().items())
        return f"{self.policy} from {iso_utc(self.at_ms)}" + (f" ({params})" if params else "")

    def as_dict(self) -> dict[str, Any]:
        return {"at": iso_utc(self.at_ms), "at_ms": self.at_ms, "policy": self.policy,
                **{k: (list(v) if isinstance(v, tuple) else v) for k, v in self.parameters().items()},
                "note": self.note, "source": self.source}


def _show(v: Any) -> str:
    return f"{v[0]:g}-{v[1]:g}" if isinstance(v, tuple) else f"{v:g}" if isinstance(v, float) else str(v)


def parse_window(text: str) -> tuple[float, float]:
    """``22-8`` or ``22:00-08:30`` as ``(start_hour, end_hour)``; ``ConfigError`` otherwise.

    >>> parse_window("22-8"), parse_window("21:30-07:00")
    ((22.0, 8.0), (21.5, 7.0))
    """
    m = _WINDOW.match(str(text))
    if m is None:
        raise ConfigError(f"--tidal-window {str(text)[:80]!r}: write START-END hours (UTC), e.g. 22-8 or "
                          "21:30-07:00 (minutes 00 to 59)")
    a = int(m.group(1)) + int(m.group(2) or 0) / 60.0
    b = int(m.group(3)) + int(m.group(4) or 0) / 60.0
    if not (0 <= a < 24 and 0 <= b < 24) or a == b:
        raise ConfigError(f"--tidal-window {text!r}: two different hours from 0 to 23:59")
    return a, b


def apply_change(scn: "PoolScenario", change: PolicyChange) -> "PoolScenario":
    """``scn`` with the pool parameters the change gave (what the enacted policy replays); the
    ones it did not give keep the scenario's value, and provenance says which came from it."""

    want = {"reservation_gpus": change.reservation_gpus, "polite_release_hour": change.release_hour,
            "mig_profile": change.mig_profile, "timeslice_replicas": change.replicas_per_gpu}
    if change.tidal_window is not None:
        want["tidal_start_hour"], want["tidal_end_hour"] = change.tidal_window
    given = {k: v for k, v in want.items() if v is not None and k in {f.name for f in fields(PoolParams)}}
    if not given:
        return scn
    prov = {**scn.provenance, **{f"pool.{k}": f"change: {change.describe()}" for k in given}}
    out = replace(scn, pool=replace(scn.pool, **given), provenance=prov)
    out.validate()
    return out


def _has_table(store: "Store") -> bool:
    return bool(store.con.execute(q.HAS_CHANGES_TABLE).fetchall()[0][0])


def record_change(store: "Store", change: PolicyChange) -> PolicyChange:
    """Write ``change`` to the store's ``changes`` table (created on first use), in one
    transaction: the same time and policy again replace its parameters, nothing else."""

    change.validate()
    window = change.tidal_window or (None, None)
    con = store.con
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(q.CHANGES_CREATE)
        con.execute(q.CHANGE_UPSERT, {
            "at_ms": int(change.at_ms), "policy": change.policy, "reservation_gpus": change.reservation_gpus,
            "release_hour": change.release_hour, "tidal_start_hour": window[0], "tidal_end_hour": window[1],
            "mig_profile": change.mig_profile, "replicas_per_gpu": change.replicas_per_gpu,
            "note": change.note or None, "source": change.source})
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return change


def list_changes(store: "Store") -> list[PolicyChange]:
    """The changes the store records, oldest first (none in a store without the table)."""

    if not _has_table(store):
        return []
    out = []
    for at, pol, res, rel, ts, te, mig, rpg, note, src in store.con.execute(q.CHANGES_LIST).fetchall():
        out.append(PolicyChange(at_ms=int(at), policy=str(pol), reservation_gpus=res, release_hour=rel,
                                tidal_window=(float(ts), float(te)) if ts is not None and te is not None else None,
                                mig_profile=mig, replicas_per_gpu=rpg, note=note or "", source=str(src)))
    return out


def change_at(store: "Store", at_ms: int) -> PolicyChange | None:
    """The recorded change at ``at_ms`` (the latest recorded there when several policies were)."""
    found = [c for c in list_changes(store) if c.at_ms == at_ms]
    return found[-1] if found else None
