"""The what-if scored against what happened after a change.

(a) **predicted**: the service calibrated on the before-period alone, replayed under the enacted
policy (its parameters as the change recorded them, :func:`analytics.change.record.apply_change`),
scaled to the after-period's length, against the after-period observed: within 25% or 15
minutes (:data:`PREDICTION_TOLERANCE`, :data:`PREDICTION_FLOOR_MIN`; the What-if's agreement
bounds); beside it, **predicted_given_after_inputs**: the same before-period model on the
after-period's traffic and batch runs, which splits a miss into the inputs' part and the model's. (b) **after_replay**: the after-period calibrated and replayed under the enacted policy
with the runs that happened (:func:`analytics.whatif.backtest.backtest_from` with that policy:
the shared backtest's bounds), and **after_old_policy**: the same period under the old, shared
policy. A missed bound is explained by the part that differs before any number: batch ran
differently, traffic higher, warm-up longer, the reservation not honoured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from analytics.errors import TidelensError

if TYPE_CHECKING:
    from analytics.change.basis import ChangeBasis
    from analytics.change.record import PolicyChange
    from analytics.whatif.observe import Observation
    from analytics.whatif.params import PoolScenario

PREDICTION_TOLERANCE = 0.25
PREDICTION_FLOOR_MIN = 15.0
TRAFFIC_HIGHER = 0.10  # more requests a day than this is "traffic higher"
BATCH_DIFFERENT = 0.10  # batch GPU-hours a day differing by more is "batch ran differently"
WARMUP_LONGER = 1.25  # a warm-up this many times the before-period's (and a minute more) is "longer"


def calibrated(basis: "ChangeBasis", span: tuple[int, int], service: str
               ) -> tuple["Observation", "PoolScenario"]:
    """The period's observation and calibrated scenario, kept on the basis (a period asked for
    again is not calibrated again)."""
    key = (span, service, basis.slo_for(service))
    if key not in basis.calibrations:
        from analytics.whatif.calibrate import scenario_from
        from analytics.whatif.observe import observe

        tl = basis.period(*span)
        obs = observe(tl["services"], tl["pool"], tl["holdings"], service=service, step_s=basis.step_s,
                      slo_for=basis.slo_ms)
        scn, _ = scenario_from(obs, slo_ms=basis.slo_for(service), gpu_model=basis.gpu_model)
        basis.calibrations[key] = (obs, scn)
    return basis.calibrations[key]


def _within(model: float, observed: float, tol: float, floor: float) -> bool:
    return abs(model - observed) <= max(tol * observed, floor)


def _reservation_honoured(change: "PolicyChange", obs: "Observation", scn: "PoolScenario") -> str | None:
    """Why the after-period does not look like the enacted policy's pool (None: it does)."""
    from analytics.times import step_start_ms, utc_hour

    batch = np.asarray(obs.batch_gpus, float)
    if change.reservation_gpus is not None and change.policy in ("partitioned", "mig"):
        room = scn.pool.gpus - change.reservation_gpus
        if batch.size and float(batch.max()) > room + 0.5:
            return (f"the reservation not honoured: batch held up to {batch.max():.0f} GPUs after the change, "
                    f"more than the {room} the pool less the {change.reservation_gpus} reserved leaves it")
    if change.tidal_window is not None and change.policy in ("tidal", "mig"):
        a, b = change.tidal_window
        h = utc_hour(step_start_ms(np.asarray(obs.ts_ms), obs.step_s * 1000))
        inside = (h >= a) & (h < b) if a < b else (h >= a) | (h < b)
        outside = float(batch[~inside].sum())
        if batch.sum() > 0 and outside > 0.02 * float(batch.sum()):
            return (f"the tidal window not honoured: {outside / batch.sum():.0%} of batch's GPU-steps after the "
                    f"change were outside {a:g}-{b:g} h")
    return None


def _surge_minutes_a_day(events: list[Any], service: str, side: dict[str, Any]) -> float:
    """Minutes a day of the service's tail events whose cause is (partly) a traffic surge."""
    mins = sum(e.duration_min * float(e.shares.get("traffic_surge", 0.0)) for e in events
               if e.service == service and side["start_ms"] < e.start_ms <= side["end_ms"])
    return mins / max(side["days"], 1e-9)


def differences(change: "PolicyChange", before: dict[str, Any], after: dict[str, Any],
                obs_b: "Observation", scn_b: "PoolScenario", obs_a: "Observation",
                scn_a: "PoolScenario", service: str, basis_events: list[Any] = ()) -> list[str]:
    """The parts of the after-period that differ from what the prediction assumed, in words."""
    out = []
    rb = before["requests"].get(service, 0.0) / max(before["days"], 1e-9)
    ra = after["requests"].get(service, 0.0) / max(after["days"], 1e-9)
    if rb > 0 and ra > rb * (1 + TRAFFIC_HIGHER):
        out.append(f"traffic higher: {service} served {ra / rb - 1:.0%} more requests a day after the change")
    sb, sa = (_surge_minutes_a_day(basis_events, service, side) for side in (before, after))
    if abs(sa - sb) > TRAFFIC_HIGHER * max(sa, sb) + 1.0:
        out.append(f"traffic {'higher' if sa > sb else 'lower'}: {service}'s tail events from traffic surges ran "
                   f"{sa:,.0f} minutes a day after the change vs {sb:,.0f} before")
    bb = before["batch_gpu_hours"] / max(before["days"], 1e-9)
    ba = after["batch_gpu_hours"] / max(after["days"], 1e-9)
    gb = float(np.median([r.gpus for r in obs_b.runs])) if obs_b.runs else 0.0
    ga = float(np.median([r.gpus for r in obs_a.runs])) if obs_a.runs else 0.0
    if bb > 0 and abs(ba - bb) > BATCH_DIFFERENT * bb:
        out.append(f"batch ran differently: {ba:,.0f} GPU-hours a day after the change vs {bb:,.0f} before "
                   f"({len(obs_a.runs)} runs of a median {ga:g} GPUs vs {len(obs_b.runs)} of {gb:g})")
    wb, wa = scn_b.service.warmup_min, scn_a.service.warmup_min
    if wa > wb * WARMUP_LONGER + 1.0:
        out.append(f"warm-up longer: {wa:.0f} minutes after the change vs {wb:.0f} before")
    why = _reservation_honoured(change, obs_a, scn_a)
    if why:
        out.append(why)
    return out


def score_change(basis: "ChangeBasis", change: "PolicyChange", before_span: tuple[int, int],
                 after_span: tuple[int, int], service: str, before: dict[str, Any],
                 after: dict[str, Any]) -> dict[str, Any]:
    """``predicted``, ``after_replay``, ``after_old_policy``, ``within``, ``differences`` and
    the sentences that say them (see the module); a period that cannot be calibrated leaves
    ``score_missing`` saying why."""
    from analytics.change.record import apply_change
    from analytics.whatif.backtest import (BACKTEST_BATCH_FLOOR_GPU_H, BACKTEST_BATCH_TOLERANCE,
                                           BACKTEST_VIOLATION_FLOOR_MIN, BACKTEST_VIOLATION_TOLERANCE,
                                           backtest_from, replay_result)
    from analytics.whatif.outputs import simulate

    try:
        obs_b, scn_b = calibrated(basis, before_span, service)
        obs_a, scn_a = calibrated(basis, after_span, service)
    except TidelensError as exc:
        return {"score_missing": str(exc), "score_sentences": [f"The what-if is not scored: {exc}"]}
    scale = after["days"] / before["days"] if before["days"] else 0.0
    pred = simulate(apply_change(scn_b, change), change.policy).summary
    predicted = {"violation_minutes": float(pred["violation_minutes"]) * scale,
                 "batch_gpu_hours": float(pred["batch_gpu_hours"]) * scale,
                 "from": f"the {before['days']:.3g} days before, replayed under {change.policy} and scaled "
                         f"to the {after['days']:.3g} days after"}
    req_b = before["requests"].get(service, 0.0)
    predicted["violation_minutes_per_million_requests"] = (
        float(pred["violation_minutes"]) / (req_b / 1e6) if req_b > 0 else None)
    # The before-period's model given the after-period's inputs (its traffic and the batch runs
    # that happened): what part of a miss is the inputs' (traffic, batch), and what the model's.
    from dataclasses import replace

    given = simulate(apply_change(replace(scn_a, service=scn_b.service), change), change.policy).summary
    given_inputs = {"violation_minutes": float(given["violation_minutes"]),
                    "batch_gpu_hours": float(given["batch_gpu_hours"]),
                    "from": f"the service as calibrated on the {before['days']:.3g} days before, on the after-period's "
                            f"traffic and batch runs, under {change.policy}"}
    bt = backtest_from(obs_a, apply_change(scn_a, change), observed_policy=change.policy)
    replay = {"violation_minutes": bt["model_violation_minutes"], "batch_gpu_hours": bt["model_batch_gpu_hours"],
              "observed_violation_minutes": bt["observed_violation_minutes"],
              "observed_batch_gpu_hours": bt["observed_batch_gpu_hours"], "policy": change.policy,
              "misses": bt["misses"]}
    old = replay_result(obs_a, scn_a, "shared").summary
    observed_v = after["violation_minutes"]
    within = {
        "prediction_violation_minutes": _within(predicted["violation_minutes"], observed_v,
                                                PREDICTION_TOLERANCE, PREDICTION_FLOOR_MIN),
        "prediction_batch_gpu_hours": _within(predicted["batch_gpu_hours"], after["batch_gpu_hours"],
                                              BACKTEST_BATCH_TOLERANCE, BACKTEST_BATCH_FLOOR_GPU_H),
        "after_replay_violation_minutes": _within(replay["violation_minutes"], replay["observed_violation_minutes"],
                                                  BACKTEST_VIOLATION_TOLERANCE, BACKTEST_VIOLATION_FLOOR_MIN),
        "after_replay_batch_gpu_hours": _within(replay["batch_gpu_hours"], replay["observed_batch_gpu_hours"],
                                                BACKTEST_BATCH_TOLERANCE, BACKTEST_BATCH_FLOOR_GPU_H),
    }
    within["after_replay"] = within["after_replay_violation_minutes"] and within["after_replay_batch_gpu_hours"]
    within["prediction_given_after_inputs_violation_minutes"] = _within(
        given_inputs["violation_minutes"], observed_v, PREDICTION_TOLERANCE, PREDICTION_FLOOR_MIN)
    diff = differences(change, before, after, obs_b, scn_b, obs_a, scn_a, service,
                       basis.events.events if basis.events is not None else [])
    said = []
    if not within["prediction_violation_minutes"]:
        said.append("The prediction from the before-period missed the after-period: "
                    + ("; ".join(diff) if diff else "no single part stands out") + f". It said "
                    f"{predicted['violation_minutes']:,.0f} minutes over the SLO for {service}; "
                    f"{observed_v:,.0f} were observed.")
        said.append(f"Given the traffic and batch runs that came, the same model says "
                    f"{given_inputs['violation_minutes']:,.0f} minutes: "
                    + ("the miss is the inputs', not the model's." if within[
                        "prediction_given_after_inputs_violation_minutes"]
                       else "the model itself misses too."))
    else:
        said.append(f"The what-if, from the before-period alone, predicted {predicted['violation_minutes']:,.0f} "
                    f"minutes over the SLO for {service} under {change.policy}; {observed_v:,.0f} were observed "
                    f"(within {PREDICTION_TOLERANCE:.0%} or {PREDICTION_FLOOR_MIN:g} minutes).")
    if not within["after_replay"]:
        said.append("The after-period replayed under the enacted policy misses what happened: "
                    + ("; ".join(diff) if diff else "no single part stands out") + " ("
                    + "; ".join(bt["misses"]) + ").")
    else:
        said.append(f"The after-period replayed under {change.policy}: {replay['violation_minutes']:,.0f} minutes "
                    f"vs {replay['observed_violation_minutes']:,.0f} observed, batch "
                    f"{replay['batch_gpu_hours']:,.0f} GPU-hours vs {replay['observed_batch_gpu_hours']:,.0f} "
                    f"(within {BACKTEST_VIOLATION_TOLERANCE:.0%} or {BACKTEST_VIOLATION_FLOOR_MIN:g} minutes, "
                    f"and {BACKTEST_BATCH_TOLERANCE:.0%}); under the old shared policy it would have had "
                    f"{float(old['violation_minutes']):,.0f} minutes.")
    return {"predicted": predicted, "predicted_given_after_inputs": given_inputs, "after_replay": replay,
            "after_old_policy": {"violation_minutes": float(old["violation_minutes"]),
                                 "batch_gpu_hours": float(old["batch_gpu_hours"]), "policy": "shared"},
            "within": within, "differences": diff, "score_sentences": said}
