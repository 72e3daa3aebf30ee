"""``promtool test rules`` files that hold the rules to :mod:`analytics.workloads`' own answers.

Given label sets of GPU holders (the simulator's pods, hostile names), :func:`classification_tests`
writes the series a cluster would export for them and, as the expected result of each map rule
series, what :func:`analytics.workloads.classify` and :func:`~analytics.workloads.pool_of_host`
decide on the same labels. :func:`holdings_tests` does the same for GPU counts: raw samples in,
the pool timeline's holdings (:func:`analytics.timeline.holdings`, computed by the caller) as
the expected sums. Either file fails under ``promtool test rules`` wherever the PromQL map and
the Python map disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from analytics import signals as s
from analytics.rules import compile as c
from analytics.rules.quoting import quote
from analytics.workloads import WorkloadMap, classify, pool_of_host

EXPORTER_JOB = "dcgm-exporter"


@dataclass(frozen=True)
class Holder:
    """A GPU holder's labels, as its series carry them."""

    namespace: str
    pod: str
    container: str = ""
    hostname: str = ""
    priority_class: str = ""
    serves: bool = False
    service: str = ""

    def python_labels(self) -> dict[str, str | None]:
        """What :data:`analytics.sql.workloads.POD_LABELS` reads for this holder."""
        return {"namespace": self.namespace or None, "pod": self.pod, "container": self.container or None,
                "hostname": self.hostname or None, "priority_class": self.priority_class or None,
                "service": (self.service or None) if self.serves else None,
                "serves": "true" if self.serves else None}


def labels_text(labels: dict[str, str], metric: str = "") -> str:
    """A series as promtool's parser reads it (empty values dropped: Prometheus has none)."""
    inner = ", ".join(f"{k}={quote(v)}" for k, v in sorted(labels.items()) if v)
    return f"{metric}{{{inner}}}"


def _series(holders: Sequence[Holder], exported: bool, steps: int) -> list[dict[str, str]]:
    out = []
    for i, h in enumerate(holders):
        own = {"namespace": h.namespace, "pod": h.pod, "container": h.container}
        if exported:  # scraped without honorLabels: the exporter's own pod, the holder's exported_*
            own = {"pod": f"dcgm-exporter-{i % 3}", "namespace": "gpu-operator", "container": "exporter",
                   **{f"exported_{k}": v for k, v in own.items()}}
        dev = {"UUID": f"GPU-{i:04d}", "gpu": "0", "Hostname": h.hostname, "job": EXPORTER_JOB, **own}
        out.append({"series": labels_text(dev, s.DCGM_FB_USED), "values": f"2048x{steps}"})
        if h.priority_class:
            info = {"namespace": h.namespace, "pod": h.pod, "node": h.hostname, "priority_class": h.priority_class}
            out.append({"series": labels_text(info, s.KSM_POD_INFO), "values": f"1x{steps}"})
        if h.serves:
            lat = {"namespace": h.namespace, "pod": h.pod, "service": h.service}
            out.append({"series": labels_text(lat, s.VLLM_E2E + "_count"), "values": f"0+1x{steps}"})
    return out


def classification_tests(wmap: WorkloadMap, cases: dict[str, Iterable[Holder]], rules_file: str,
                         cfg: c.RulesConfig = c.RulesConfig()) -> dict[str, Any]:
    """A promtool test file: each holder's class (and the rule that decided it), team and node
    pool from the rules, expected as :mod:`analytics.workloads` decides them; each case (a
    cluster: holders unique by namespace and pod) once with dcgm-exporter's labels as they are
    and once behind a scrape without ``honorLabels``."""
    tests = [t for name, holders in cases.items() for t in _classification_case(wmap, name, holders, cfg)]
    return {"rule_files": [rules_file], "evaluation_interval": f"{cfg.interval_s}s", "tests": tests}


def decided_rules(wmap: WorkloadMap, cases: dict[str, Iterable[Holder]]) -> set[str]:
    """The rules that decide some holder's class in ``cases`` (what a test file covers)."""
    return {classify(wmap, h.python_labels()).rule for hs in cases.values() for h in hs}


def _classification_case(wmap: WorkloadMap, name: str, holders: Iterable[Holder], cfg: c.RulesConfig
                         ) -> list[dict[str, Any]]:
    seen: dict[tuple[str, str], Holder] = {}
    for h in holders:
        seen.setdefault((h.namespace, h.pod), h)
    hs = list(seen.values())
    steps = 3
    at = f"{2 * cfg.interval_s}s"
    classes, teams = [], []
    for h in hs:
        d = classify(wmap, h.python_labels())
        ident = {"namespace": h.namespace, "pod": h.pod}
        classes.append({"labels": labels_text({**ident, "workload": d.workload or "", "class": d.cls,
                                               c.RULE_LABEL: d.rule}), "value": 1})
        teams.append({"labels": labels_text({**ident, "team": d.team or ""}), "value": 1})
    pools = [{"labels": labels_text({c.NODE: host, "pool": pool_of_host(wmap, host or None)}), "value": 1}
             for host in sorted({h.hostname for h in hs})]
    tests = []
    for exported in (False, True):
        tests.append({
            "name": f"{name}: classification ({'exported_* labels' if exported else 'labels as written'})",
            "interval": f"{cfg.interval_s}s",
            "input_series": _series(hs, exported, steps),
            "promql_expr_test": [
                {"expr": f"max by (namespace, pod, workload, class, {c.RULE_LABEL}) ({c.POD_CLASS})",
                 "eval_time": at, "exp_samples": classes},
                {"expr": f"max by (namespace, pod, team) ({c.POD_TEAM})", "eval_time": at, "exp_samples": teams},
                {"expr": f"max by ({c.NODE}, pool) ({c.NODE_POOL})", "eval_time": at, "exp_samples": pools},
            ]})
    return tests


def _values(points: dict[int, float], n_steps: int) -> str:
    """promtool's expanding notation: one value per interval from 0, ``_`` where none (a run of
    ``n`` missing as ``_xn``)."""
    out: list[str] = []
    gap = 0
    for i in range(n_steps):
        if i in points:
            if gap:
                out.append("_" if gap == 1 else f"_x{gap}")
                gap = 0
            out.append(repr(float(points[i])))
        else:
            gap += 1
    if gap:
        out.append("_" if gap == 1 else f"_x{gap}")
    return " ".join(out)


def holdings_tests(samples: Iterable[tuple[str, dict[str, str], int, float]], t0_ms: int,
                   expected: Iterable[tuple[int, str, str, str | None, str | None, float]], rules_file: str,
                   cfg: c.RulesConfig = c.RulesConfig()) -> dict[str, Any]:
    """A promtool test file: GPUs by pool, class, team and workload from the rules, expected as
    the pool timeline's holdings ``(ts_ms, pool, cls, team, workload, gpus)`` on the same samples.

    Samples must lie on the interval grid from ``t0_ms`` (promtool's series start at 0).
    """
    step = cfg.interval_s * 1000
    by_series: dict[tuple[str, tuple], dict[int, float]] = {}
    last = 0
    for metric, labels, ts, value in samples:
        i = (ts - t0_ms) // step
        if (ts - t0_ms) % step:
            raise ValueError(f"sample at {ts} is off the {cfg.interval_s}s grid from {t0_ms}")
        by_series.setdefault((metric, tuple(sorted(labels.items()))), {})[i] = value
        last = max(last, i)
    inputs = [{"series": labels_text(dict(k), m), "values": _values(v, last + 1)} for (m, k), v in by_series.items()]
    per_time: dict[int, list[dict[str, Any]]] = {}
    for ts, pool, cls, team, workload, gpus in expected:
        if gpus:
            per_time.setdefault(ts, []).append({"labels": labels_text(
                {"pool": pool, "class": cls, "team": team or "", "workload": workload or ""}), "value": gpus})
    tests = [{"name": "GPUs held by pool, class, team and workload", "interval": f"{cfg.interval_s}s",
              "input_series": inputs,
              "promql_expr_test": [{"expr": f"sum by (pool, class, team, workload) ({c.GPUS})",
                                    "eval_time": f"{(ts - t0_ms) // 1000}s", "exp_samples": rows}
                                   for ts, rows in sorted(per_time.items())]}]
    return {"rule_files": [rules_file], "evaluation_interval": f"{cfg.interval_s}s", "tests": tests}


def alert_tests(inputs: Iterable[tuple[str, dict[str, str], dict[int, float]]], origin_ms: int,
                expected: dict[int, dict[str, list[dict[str, dict[str, str]]]]], rule_files: Sequence[str],
                group_order: Sequence[str], *, name: str, cfg: c.RulesConfig = c.RulesConfig()) -> dict[str, Any]:
    """A promtool test file: at each time of ``expected`` (epoch ms), for each alert it names, the
    alerts firing (their labels, ``alertname`` aside, and annotations), exactly.

    ``inputs`` are series ``(metric, labels, {ts_ms: value})`` on the interval grid from
    ``origin_ms``, which promtool calls time 0 (so that ``hour()`` and ``day_of_week()`` read
    the data's own: give a midnight UTC, a Thursday where weekdays matter); ``group_order``
    the groups in the order they evaluate at one time (the recording rules before the alerts
    reading them, as in one group).
    """
    step = cfg.interval_s * 1000
    rows = []
    last = 0
    for metric, labels, points in inputs:
        idx = {}
        for ts, v in points.items():
            if (ts - origin_ms) % step or ts < origin_ms:
                raise ValueError(f"sample at {ts} is off the {cfg.interval_s}s grid from {origin_ms}")
            idx[(ts - origin_ms) // step] = v
        if idx:
            last = max(last, max(idx))
            rows.append((labels_text(labels, metric), idx))
    inputs_ = [{"series": series, "values": _values(idx, last + 1)} for series, idx in rows]
    checks = [{"eval_time": f"{(ts - origin_ms) // 1000}s", "alertname": alert,
               "exp_alerts": [{"exp_labels": a["labels"], "exp_annotations": a["annotations"]} for a in alerts]}
              for ts, by_alert in sorted(expected.items()) for alert, alerts in sorted(by_alert.items())]
    return {"rule_files": list(rule_files), "evaluation_interval": f"{cfg.interval_s}s",
            "group_eval_order": list(group_order),
            "tests": [{"name": name, "interval": f"{cfg.interval_s}s", "input_series": inputs_,
                       "alert_rule_test": checks}]}
