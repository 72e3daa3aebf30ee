"""Changes Tidelens sees in the data, each with its evidence, for the user to confirm.

Four signs, each read the same way on every day of the store (days are UTC days of the pool
timeline; a day counts when it has most of its steps):

- **the GPUs batch can reach shrink**: from the first day on which, to the end, the most GPUs
  batch held on any day stays under :data:`SHRINK` of the median daily most before it, while
  batch still ran on at least :data:`MIN_DAYS` of them (a quiet weekend is no change), dated
  the first of those days batch ran up to its new ceiling: ``partitioned``, reserving what
  batch no longer reached;
- **batch stops overlapping the ramp**: before some day batch held GPUs through the morning
  ramp (the first hour the typical day's traffic passes half its peak, and the two after) on
  most days, and from it on it never does: ``tidal``, its window ending at the ramp;
- **MIG instances appear**: a MIG profile whose first sample comes a day or more into the
  store: ``mig`` with that profile;
- **a Kueue ClusterQueue's GPU quota changes** (``kueue_cluster_queue_nominal_quota``, where the
  store has it): ``partitioned`` when the quota shrank, else ``shared``.

A candidate is a proposal: :func:`propose` never writes it; ``tidelens change add`` (the
command each candidate prints) or the What-if page's *record* does, when the user confirms it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from analytics.change.basis import _whole_timelines
from analytics.change.record import PolicyChange
from analytics.measures import gpu_hours
from analytics.sql import changes as q
from analytics.timeline import Timelines
from analytics.times import iso_utc

if TYPE_CHECKING:
    from analytics.store import Store
    from analytics.workloads import WorkloadMap

DAY_MS = 86_400_000
SHRINK = 0.8  # batch's daily most after / its median daily most before
MIN_DAYS = 2  # days each side a sign must hold on
QUIET = 0.25  # a day batch's most is under this share of before's median: batch barely ran
RAMP_HOURS = 3
OVERLAP_GPU_H = 1.0  # batch GPU-hours in the ramp window that count as overlapping it


@dataclass(frozen=True)
class Candidate:
    """A change the data suggests, its evidence in words, and whether it is recorded already."""

    change: PolicyChange
    sign: str
    evidence: str
    recorded: bool = False

    def command(self, db: str) -> str:
        """The command that records it (what confirming it means)."""
        import shlex


        c = self.change
        parts = ["tidelens", "change", "add", "--db", db, "--at", iso_utc(c.at_ms), "--policy", c.policy]
        for k, v in c.parameters().items():
            parts += ["--" + k.replace("_", "-"), f"{v[0]:g}-{v[1]:g}" if isinstance(v, tuple) else str(v)]
        return " ".join(shlex.quote(p) for p in parts)

    def as_dict(self) -> dict[str, Any]:
        return {**self.change.as_dict(), "sign": self.sign, "evidence": self.evidence, "recorded": self.recorded}


def _daily(pool: pl.DataFrame, holdings: pl.DataFrame, services: pl.DataFrame, step_s: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per step: ts (ms), batch GPUs, pool GPUs, traffic (all services); and the day index."""
    grid = pool.group_by("ts").agg(pl.col("gpus_total").sum()).sort("ts")
    batch = (holdings.filter(pl.col("cls") == "batch").group_by("ts").agg(pl.col("gpus").sum().alias("batch"))
             if holdings.height else pl.DataFrame(schema={"ts": grid.schema["ts"], "batch": pl.Float64}))
    rps = (services.group_by("ts").agg(pl.col("rps").fill_null(0.0).sum().alias("rps"))
           if services.height else pl.DataFrame(schema={"ts": grid.schema["ts"], "rps": pl.Float64}))
    f = grid.join(batch, on="ts", how="left").join(rps, on="ts", how="left").fill_null(0.0)
    ts = f["ts"].dt.epoch("ms").to_numpy().astype(np.int64)
    return (ts, f["batch"].to_numpy().astype(float), f["gpus_total"].to_numpy().astype(float),
            f["rps"].to_numpy().astype(float), (ts - 1) // DAY_MS)


def _full_days(day: np.ndarray, step_s: int) -> list[int]:
    days, counts = np.unique(day, return_counts=True)
    return [int(d) for d, n in zip(days, counts) if n >= 0.9 * DAY_MS / 1000 / step_s]


def _shrink(ts, batch, pool, day, days: list[int]) -> Candidate | None:
    most = np.array([batch[day == d].max(initial=0.0) for d in days])
    found = None
    for k in range(MIN_DAYS, len(days) - MIN_DAYS + 1):  # the first day the pattern holds from
        before = most[:k][most[:k] > 0]
        if before.size < MIN_DAYS:
            continue
        med, after = float(np.median(before)), float(most[k:].max())
        # still running after, only less of the pool: a weekend without the big job is no change
        running = int((most[k:] >= QUIET * med).sum())
        if after < SHRINK * med and running >= MIN_DAYS:
            found = (k, med, after)
            break
    if found is None:
        return None
    k, med, after = found
    # Days batch ran little (a weekend) belong to either side: the change is where batch first
    # ran up to its new ceiling.
    while most[k] < max(QUIET * med, 0.5 * after):
        k += 1
    size = float(pool.max(initial=0.0))
    at = days[k] * DAY_MS
    reserve = int(max(0, round(size - after)))

    return Candidate(PolicyChange(at_ms=at, policy="partitioned", reservation_gpus=reserve, source="candidate"),
                     "the GPUs batch can reach shrink",
                     f"from {iso_utc(at)[:10]} batch held at most {after:.0f} GPUs on any day "
                     f"({len(days) - k} days); before it, a median of {med:.0f} a day at its most "
                     f"(pool of {size:.0f} GPUs: {reserve} it no longer reached)")


def _ramp_stop(ts, batch, rps, day, days: list[int], step_s: int) -> Candidate | None:
    if rps.max(initial=0.0) <= 0:
        return None
    minute = ((ts - 1) % DAY_MS) // 60_000
    prof = pl.DataFrame({"m": minute // 60, "r": rps}).group_by("m").agg(pl.col("r").median()).sort("m")
    hours, level = prof["m"].to_numpy(), prof["r"].to_numpy()
    up = np.flatnonzero(level >= 0.5 * level.max())
    if up.size == 0:
        return None
    ramp = int(hours[up[0]])
    in_ramp = (minute // 60 >= ramp) & (minute // 60 < ramp + RAMP_HOURS)

    overlap = np.array([gpu_hours(batch[(day == d) & in_ramp], step_s=step_s) for d in days])
    busy = np.array([batch[day == d].sum() > 0 for d in days])  # days batch ran at all
    to_ramp = (ramp - minute // 60) % 24
    eve = np.array([batch[(day == d) & (to_ramp >= 1) & (to_ramp <= RAMP_HOURS)].sum() > 0 for d in days])
    for k in range(MIN_DAYS, len(days) - MIN_DAYS + 1):
        b_on, a_on = busy[:k], busy[k:]
        if b_on.sum() < MIN_DAYS or a_on.sum() < MIN_DAYS:
            continue
        hit = overlap[:k][b_on] > OVERLAP_GPU_H
        # The change is a day batch ran up to the ramp and was gone by it, and so did at least
        # MIN_DAYS from it: a day batch held nothing in the hours before the ramp (a weekend
        # without the nightly run) belongs to either side and is no evidence.
        if hit.mean() >= 0.5 and not (overlap[k:] > OVERLAP_GPU_H).any() and eve[k] and eve[k:].sum() >= MIN_DAYS:

            at = days[k] * DAY_MS
            return Candidate(PolicyChange(at_ms=at, policy="tidal", tidal_window=(_window_start(ts, batch, day, days[k:]),
                                                                                  float(ramp)), source="candidate"),
                             "batch stops overlapping the ramp",
                             f"before {iso_utc(at)[:10]} batch held GPUs through the {ramp:02d}:00 ramp on "
                             f"{int(hit.sum())} of {int(b_on.sum())} days it ran (a median "
                             f"{float(np.median(overlap[:k][b_on])):.0f} GPU-hours in {ramp:02d}-{ramp + RAMP_HOURS:02d} h); "
                             f"from it, on none of {int(a_on.sum())}, though batch held GPUs in the {RAMP_HOURS} "
                             f"hours before the ramp on {int(eve[k:].sum())} of them")
    return None


def _window_start(ts, batch, day, days: list[int]) -> float:
    """The hour batch first held GPUs on the days after (the window's likely start)."""
    hours = []
    for d in days:
        on = np.flatnonzero((day == d) & (batch > 0))
        if on.size:
            hours.append(((int(ts[on[0]]) - 1) % DAY_MS) // 3_600_000)
    return float(np.median(hours)) if hours else 22.0


def _mig(store: "Store", first_ms: int) -> list[Candidate]:
    out = []
    for profile, series, first, _last in store.query(q.MIG_PROFILE_SPANS).iter_rows():
        if first is not None and first - first_ms >= DAY_MS:
            out.append(Candidate(PolicyChange(at_ms=int(first), policy="mig", mig_profile=str(profile), source="candidate"),
                                 "MIG instances appear",
                                 f"{series} series of MIG profile {profile} start at {iso_utc(int(first))}, "
                                 f"{(first - first_ms) / DAY_MS:.1f} days into the store"))
    return out


def _quota(store: "Store") -> list[Candidate]:
    rows = store.query(q.QUEUE_QUOTA)
    out = []
    for (queue,), g in rows.group_by(["cluster_queue"], maintain_order=True):
        v, t = g["value"].to_numpy(), g["ts_ms"].to_numpy()
        for i in np.flatnonzero(np.abs(np.diff(v)) > 0.5) + 1:
            shrank = v[i] < v[i - 1]
            out.append(Candidate(PolicyChange(at_ms=int(t[i]), policy="partitioned" if shrank else "shared",
                                              source="candidate"),
                                 "a Kueue ClusterQueue's quota changes",
                                 f"ClusterQueue {queue}'s nominal GPU quota went from {v[i - 1]:g} to {v[i]:g} "
                                 f"at {iso_utc(int(t[i]))}"))
    return out


def propose_from(store: "Store", timelines: Timelines, step_s: int,
                 recorded: list[PolicyChange] = ()) -> list[Candidate]:
    """The candidates of a store whose timelines are built (see the module), oldest first; one
    recorded within a day with the same policy is marked ``recorded``."""
    ts, batch, pool, rps, day = _daily(timelines.pool, timelines.holdings, timelines.services, step_s)
    found: list[Candidate] = []
    if ts.size:
        days = _full_days(day, step_s)
        mask = np.isin(day, days)
        for c in (_shrink(ts[mask], batch[mask], pool[mask], day[mask], days),
                  _ramp_stop(ts[mask], batch[mask], rps[mask], day[mask], days, step_s)):
            if c is not None:
                found.append(c)
        found.extend(_mig(store, int(ts[0])))
    found.extend(_quota(store))
    out = []
    for c in sorted(found, key=lambda c: (c.change.at_ms, c.change.policy)):
        near = any(r.policy == c.change.policy and abs(r.at_ms - c.change.at_ms) <= DAY_MS for r in recorded)
        out.append(Candidate(c.change, c.sign, c.evidence, near))
    return out


def propose(store: "Store", *, step_s: int = 60, wmap: "WorkloadMap | None" = None,
            recorded: list[PolicyChange] = ()) -> list[Candidate]:
    """:func:`propose_from` on the store's whole span (its timelines built here)."""

    return propose_from(store, _whole_timelines(store, step_s, wmap), step_s, recorded)
