"""The workload map compiled to Prometheus recording rules: one group, its rules in four stages.

1. Devices (raw series only): each device and holder with dcgm-exporter's holder
   labels (``exported_*`` where the exporter is scraped without ``honorLabels``) and node, a MIG
   instance's share of its GPU, activity, memory, which pods serve requests and their priority
   class; and the live pull's service, autoscaler and Kueue queries (histogram bucket increases
   by service and ``le``, desired vs ready replicas, admissions) under the labels a pull stores.
2. Holders: the labels each holder is matched on; each node's pool.
3. The map itself, one rule per map rule and field: a selector with the
   rule's matchers, its class or team as fixed labels, and ``unless`` on the holder's identity
   for every earlier rule setting the same field, so the first match decides as in
   :func:`analytics.workloads.classify`; and each holder's share of its devices.
4. Pools: what the pages read: GPUs held by pool, class, team and workload (idle,
   unmanaged and unknown as DESIGN.md counts them), share-weighted activity, memory.

A rule reads only the records of rules before it: Prometheus evaluates a group's rules in order
at one timestamp, so each stage sees the previous at the same time; a backfill, which cannot,
runs them in passes (:func:`passes`). Every
recorded series carries ``tidelens_map_digest`` (:func:`map_digest` of the map and the
settings), so a pull can tell rules compiled from another map. Names follow the
``level:metric:operations`` convention.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from analytics import promql as lq
from analytics import signals as s
from analytics.errors import ConfigError
from analytics.rules import quoting as p
from analytics.workloads import Rule, WorkloadMap

DIGEST_LABEL = "tidelens_map_digest"
RULE_LABEL = "tidelens_rule"
NODE = "tidelens_node"  # the device's node: Hostname, hostname, node, kubernetes_node or instance
COMPILER_VERSION = 1
# One group: its rules run in order, each seeing the ones before at the same evaluation time.
GROUP = "tidelens"

# Recorded series (level:metric:operations).
DEVICE_HOLDER = "device_holder:tidelens_dcgm:last"  # 1 per (device, holder) seen in the step
DEVICE_FRACTION = "device:tidelens_gpu_fraction:ratio"  # a MIG instance's compute slices / the GPU's
DEVICE_ACTIVITY = "device:tidelens_gpu_activity:pct"  # GR_ENGINE_ACTIVE x 100, else GPU_UTIL
DEVICE_FB_USED = "device:tidelens_fb_used:mib"
JOB_K8S = "job:tidelens_pod_labels:present"  # the exporter labels pods somewhere (Kubernetes mode)
POD_PRIORITY = "namespace_pod:tidelens_priority_class:info"
POD_SERVES = "namespace_pod:tidelens_serves:info"
POD_SERVICE = "namespace_pod:tidelens_service:info"
HOLDER_WORKLOAD = "namespace_pod:tidelens_workload:info"  # each holder's workload (pod name) and node
HOLDER_INFO = "namespace_pod:tidelens_holder:info"  # the labels the map's rules match on
POD_CLASS = "namespace_pod:tidelens_class:info"
POD_TEAM = "namespace_pod:tidelens_team:info"
NODE_POOL = "node:tidelens_pool:info"
# Each map rule's matches, valued by the rule's rank in the map (1 = first): the first match is
# the lowest rank (bottomk), so each rule is written once and the rules grow linearly with the map.
CLASS_MATCH = "namespace_pod:tidelens_class_match:rank"
TEAM_MATCH = "namespace_pod:tidelens_team_match:rank"
POOL_MATCH = "node:tidelens_pool_match:rank"
DEVICE_SHARE = "device_holder:tidelens_gpus:share"  # GPUs a holder holds (MIG and time-slicing shares)
GPUS = "pool_class_team_workload:tidelens_gpus:sum"  # what the pool timeline's holdings read
ACTIVITY_WEIGHTED = "pool:tidelens_gpu_activity_pct:weighted_sum"  # sum of activity x share
ACTIVITY_WEIGHT = "pool:tidelens_gpu_activity_pct:weight"  # sum of the shares reporting activity
FB_USED = "pool:tidelens_fb_used_mib:sum"
CLASS_ACTIVITY = "pool_class_team:tidelens_gpu_activity_pct:share_weighted_sum"

# The map's keys, as the holder info labels them.
LABEL_OF = {"namespace": "namespace", "pod": "pod", "workload": "workload", "container": "container",
            "priority_class": "priority_class", "hostname": NODE, "service": "service", "serves": "serves"}
HOLDER = ("namespace", "pod")
DEVICE = ("UUID", "GPU_I_ID")
HOST_SPELLINGS = ("Hostname", "hostname", "node", "kubernetes_node", "instance")
_LATENCY_COUNTS = tuple(f"{m}_count" for m in (s.VLLM_TTFT, s.VLLM_E2E, s.HTTP_DURATION, s.TGI_DURATION,
                                               s.KSERVE_DURATION, s.TRITON_SUMMARY_US))


@dataclass
class RulesConfig:
    """How the rules are evaluated; ``tidelens export rules`` options."""

    interval_s: int = field(default=60, metadata={
        "help": "rule evaluation interval in seconds: the scrape interval of dcgm-exporter, and the "
                "step `tidelens pull` reads the recorded series at (a multiple of it)"})
    memory_window: str = field(default="1h", metadata={
        "help": "how far back a rule looks for what a store would know from its whole span: whether an "
                "exporter labels pods (Kubernetes mode), a pod's priority class, whether it serves"})


def map_digest(wmap: WorkloadMap, cfg: RulesConfig = RulesConfig()) -> str:
    """12 hex digits naming the map (every rule, the built-in ones included) and the settings."""
    doc: dict[str, Any] = {
        "v": COMPILER_VERSION, "cfg": asdict(cfg), "default_pool": wmap.default_pool,
        "idle": [wmap.idle_activity_pct, wmap.idle_memory_mib],
        "rules": [[r.name, sorted(r.match.items()), r.cls, r.team, r.pool] for r in wmap.all_rules()]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]


def _rec(record: str, expr: str, digest: str, **labels: str) -> dict[str, Any]:
    return {"record": record, "expr": expr, "labels": {**labels, DIGEST_LABEL: digest}}


def _ne(label: str) -> str:
    return f'{label}!=""'


def _eq(label: str) -> str:
    return f'{label}=""'


def _last(metric: str, cfg: RulesConfig, *matchers: str) -> str:
    return lq.last(p.selector(metric, matchers), cfg.interval_s * 1000)


def _present(metric: str, cfg: RulesConfig, *matchers: str) -> str:
    return f"present_over_time({p.selector(metric, matchers)}[{cfg.memory_window}])"


def _norm_holder(metric: str, cfg: RulesConfig) -> str:
    """A device metric's last sample with the holder dcgm-exporter wrote: behind a scrape
    without ``honorLabels`` (its job writes ``exported_pod`` somewhere) the plain ``pod`` is the
    exporter's own, so ``exported_*`` replace it, empty where absent."""
    raw = _last(metric, cfg)
    mode = f"group by (job) ({_present(metric, cfg, _ne('exported_pod'))})"
    exported = f"({raw} and on (job) {mode})"
    for label in ("pod", "namespace", "container"):
        exported = p.overwrite(exported, label, f"exported_{label}", "(?s)(.*)")
    return f"{exported} or ({raw} unless on (job) {mode})"


def _device_metrics() -> tuple[str, ...]:
    return (s.DCGM_FB_USED, s.DCGM_GR_ENGINE_ACTIVE, s.DCGM_GPU_UTIL)


def _devices(cfg: RulesConfig, *matchers: str) -> str:
    """Each device (``UUID``, ``GPU_I_ID``) with a sample in the step, of any device metric."""
    return " or ".join(f"group by ({p.by(DEVICE)}) ({_last(m, cfg, *matchers)})" for m in _device_metrics())


def mig_profile_regex(k: int, total: int) -> str:
    """Profiles whose first digit run followed by ``g.`` reads ``k`` (``total``: that many or more),
    as :func:`analytics.timeline.pool.mig_fraction` searches them, without lookarounds: a
    prefix in which every digit run is followed by something other than ``g.``.

    >>> import re
    >>> rx = re.compile(mig_profile_regex(3, 7))
    >>> [bool(rx.fullmatch(x)) for x in ("3g.40gb", "1c.3g.40gb", "1g.3g.x", "13g.x", "x1g2g3g.")]
    [True, True, False, False, True]
    """
    run_g = "(?:[0-9]+g)*"
    prefix = f"(?:[^0-9]|{run_g}[0-9]+(?:[^0-9g]|g[^.0-9]))*{run_g}"
    digits = "0+" if k == 0 else f"0*{k}" if k < total else f"0*(?:[{total}-9]|[1-9][0-9]+)"
    return f"(?s){prefix}{digits}g[.].*"


def _mig_fraction_rules(cfg: RulesConfig, digest: str) -> list[dict[str, Any]]:
    """A device's share of its GPU (:func:`analytics.timeline.pool.mig_fraction`): compute
    slices over 7 (4 on an A30), at most 1; 1 without a profile that names slices."""
    out = []
    for total, model_op in ((4, "=~"), (7, "!~")):
        model = f'modelName{model_op}{p.quote("(?is).*A30.*")}'
        for k in range(total + 1):
            prof = f"GPU_I_PROFILE=~{p.quote(mig_profile_regex(k, total))}"
            out.append(_rec(DEVICE_FRACTION, f"({_devices(cfg, prof, model)}) * {k / total if k < total else 1.0!r}",
                            digest, **{RULE_LABEL: f"{k}{'+' if k == total else ''} of {total} slices"}))
    sliced = f'GPU_I_PROFILE=~{p.quote("(?s).*[0-9]g[.].*")}'
    out.append(_rec(DEVICE_FRACTION, f"({_devices(cfg)}) unless on ({p.by(DEVICE)}) ({_devices(cfg, sliced)})",
                    digest, **{RULE_LABEL: "whole GPU"}))
    return out


def pass1(cfg: RulesConfig, digest: str) -> list[dict[str, Any]]:
    """Devices, their holders and the pods' facts, from raw series only."""
    holder_labels = (*DEVICE, "GPU_I_PROFILE", "modelName", NODE, "namespace", "pod", "container", "job")
    # The three metrics' holders first, then the node's spellings read once per device and holder
    # (not once per metric: the label_replace chain is most of this rule's cost); the set of
    # holders is the same, as the node comes from labels the first aggregation keeps.
    spelled = (*(x for x in holder_labels if x != NODE), *HOST_SPELLINGS)
    held = f"max by ({p.by(spelled)}) ({' or '.join(f'({_norm_holder(m, cfg)})' for m in _device_metrics())})"
    held = f"max by ({p.by(holder_labels)}) ({p.first_present(held, NODE, HOST_SPELLINGS)})"
    rules = [_rec(DEVICE_HOLDER, f"clamp({held}, 1, 1)", digest)]
    rules += _mig_fraction_rules(cfg, digest)
    dev_node = (*DEVICE, NODE, "job")

    def dev(metric: str) -> str:
        return f"max by ({p.by(dev_node)}) ({p.first_present(_last(metric, cfg), NODE, HOST_SPELLINGS)})"

    rules.append(_rec(DEVICE_ACTIVITY, f"{dev(s.DCGM_GR_ENGINE_ACTIVE)} * 100 or {dev(s.DCGM_GPU_UTIL)}", digest))
    rules.append(_rec(DEVICE_FB_USED, dev(s.DCGM_FB_USED), digest))
    k8s = " or ".join(f"group by (job) ({_present(m, cfg, _ne(label))})"
                      for m in _device_metrics() for label in ("exported_pod", "pod"))
    rules.append(_rec(JOB_K8S, k8s, digest))

    def pod_norm(expr: str) -> str:  # analytics.labels: exported_* wins where set
        for label in ("pod", "namespace"):
            expr = p.overwrite(expr, label, f"exported_{label}")
        return expr

    pc = f"max by (namespace, pod, priority_class) ({pod_norm(_present(s.KSM_POD_INFO, cfg, _ne('priority_class')))})"
    rules.append(_rec(POD_PRIORITY, f"topk by (namespace, pod) (1, {pc})", digest))
    serves = " or ".join(f"group by (namespace, pod) ({pod_norm(_present(m, cfg))})" for m in _LATENCY_COUNTS)
    rules.append(_rec(POD_SERVES, serves, digest, serves="true"))
    svc = " or ".join(
        alt for m in _LATENCY_COUNTS for alt in (
            f"max by (namespace, pod, service) ({pod_norm(_present(m, cfg, _ne('service'), _eq('exported_service')))})",
            f"max by (namespace, pod, service) ({p.overwrite(pod_norm(_present(m, cfg, _ne('exported_service'))), 'service', 'exported_service')})"))
    rules.append(_rec(POD_SERVICE, f"topk by (namespace, pod) (1, {svc})", digest))
    return rules


def _sel(metric: str, at: tuple[str, int], *matchers: str) -> str:
    """An earlier rule's series at this evaluation only (``at``: the map's digest and the
    interval): the instant lookback would also see the previous evaluation's series of a holder
    gone since."""
    digest, interval_ms = at
    selector = p.selector(metric, (*matchers, f"{DIGEST_LABEL}={p.quote(digest)}"))
    return f"last_over_time({selector}[{interval_ms - 1}ms])"


def holder_workload(at: tuple[str, int]) -> str:
    """Per holder (namespace, pod, container, node): its workload, from the pod name."""
    pattern, repl = lq._workload_pattern()
    base = f"max by (namespace, pod, container, {NODE}) ({_sel(DEVICE_HOLDER, at, _ne('pod'))})"
    # the pod itself where no controller suffix matches (a name with a newline included: the
    # suffix patterns' `.` stops at one, as Python's does)
    return p.label_replace(p.label_replace(base, "workload", "$1", "pod", "(?s)(.*)"),
                           "workload", repl, "pod", f"(?-s:{pattern})")


def holder_info(at: tuple[str, int]) -> str:
    """Per holder: the labels the map matches on (:func:`holder_workload`'s record, the
    priority class, whether it serves, its service)."""
    # each left join names its left side twice, so the three nest it 8 times: a record read
    # 8 times costs a quarter of the workload's label_replace evaluated 8 times (the digest
    # label it carries is the one this rule records)
    wl = _sel(HOLDER_WORKLOAD, at)
    for record, label in ((POD_PRIORITY, "priority_class"), (POD_SERVES, "serves"), (POD_SERVICE, "service")):
        wl = f"({wl} * on (namespace, pod) group_left ({label}) {_sel(record, at)}) or on (namespace, pod) {wl}"
    return wl


def _ranked(rules: list[Rule], info: str, keep: tuple[str, ...], at: tuple[str, int]) -> list[tuple[Rule, str]]:
    """Per rule, in order: what its matchers select of ``info``, valued by its rank (1, 2, ...).
    Each rule is its own selector, whatever came before it: the map's size sets the rules' size
    linearly (each rule less every earlier one's matches made 500 rules 27 MB of PromQL)."""
    return [(rule, f"max by ({p.by(keep)}) ({_sel(info, at, *p.matchers(rule.match, LABEL_OF))}) * {rank}")
            for rank, rule in enumerate(rules, start=1)]


def first_match(record: str, ident: tuple[str, ...], at: tuple[str, int]) -> str:
    """Per ``ident`` (a holder, a node), the series of ``record`` of the lowest rank, valued 1: the
    first rule that matches decides, as in :func:`analytics.workloads.classify`."""
    return f"clamp(bottomk by ({p.by(ident)}) (1, {_sel(record, at)}), 1, 1)"


def team_of(at: tuple[str, int]) -> str:
    """Per holder, its team: the first team rule's, else no team (the team record's expression,
    which the pool sums also read inline, so that they stay in the backfill's fifth pass)."""
    rest = f"max by (namespace, pod) ({_sel(HOLDER_INFO, at)}) unless on (namespace, pod) {_sel(TEAM_MATCH, at)}"
    return f"{first_match(TEAM_MATCH, HOLDER, at)} or {p.set_label(rest, RULE_LABEL, 'no rule sets a team')}"


def _team_expr(expr: str, template: str) -> str:
    """``team`` from a template naming ``{namespace}`` and ``{workload}`` (one label_replace over
    the two joined: Go's Expand, ``$`` escaped)."""
    if "{namespace}" not in template and "{workload}" not in template:
        return p.set_label(expr, "team", template)
    sep = "\x1f"
    joined = f'label_join({expr}, "tidelens_nw", {p.quote(sep)}, "namespace", "workload")'
    repl = template.replace("$", "$$").replace("{namespace}", "${1}").replace("{workload}", "${2}")
    return p.label_replace(joined, "team", repl, "tidelens_nw", f"(?s)(.*?){sep}(.*)")


def pass2(wmap: WorkloadMap, cfg: RulesConfig, digest: str) -> list[dict[str, Any]]:
    """The map: class and team per holder, pool per node, first match deciding each."""
    rules = wmap.all_rules()  # each pattern already read as Go's regexp reads it (analytics.patterns)
    at = (digest, cfg.interval_s * 1000)
    out = [_rec(HOLDER_WORKLOAD, holder_workload(at), digest), _rec(HOLDER_INFO, holder_info(at), digest)]
    keep = (*HOLDER, "workload")
    for rule, expr in _ranked([r for r in rules if r.cls is not None], HOLDER_INFO, keep, at):
        out.append(_rec(CLASS_MATCH, expr, digest, **{"class": rule.cls or "other", RULE_LABEL: rule.name}))
    out.append(_rec(POD_CLASS, first_match(CLASS_MATCH, HOLDER, at), digest))
    for rule, expr in _ranked([r for r in rules if r.team is not None], HOLDER_INFO, keep, at):
        team = f"max by (namespace, pod, team) ({_team_expr(expr, rule.team or '')})"
        out.append(_rec(TEAM_MATCH, team, digest, **{RULE_LABEL: rule.name}))
    out.append(_rec(POD_TEAM, team_of(at), digest))
    pool_rules = [r for r in wmap.rules if r.pool is not None and r.match and set(r.match) <= {"hostname"}]
    for rule, expr in _ranked(pool_rules, DEVICE_HOLDER, (NODE,), at):
        out.append(_rec(POOL_MATCH, expr, digest, pool=rule.pool or wmap.default_pool, **{RULE_LABEL: rule.name}))
    out.append(_rec(NODE_POOL, first_match(POOL_MATCH, (NODE,), at), digest))
    rest = f"group by ({NODE}) ({_sel(DEVICE_HOLDER, at)}) unless on ({NODE}) {_sel(POOL_MATCH, at)}"
    out.append(_rec(NODE_POOL, rest, digest, pool=wmap.default_pool, **{RULE_LABEL: "default pool"}))
    return _unique(out)


def _unique(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rules recording the same name with the same labels are one series twice (promtool's lint):
    a repeated rule name gets its position."""
    seen: set[tuple] = set()
    for i, r in enumerate(rules, start=1):
        key = (r["record"], tuple(sorted(r["labels"].items())))
        if key in seen:
            r["labels"][RULE_LABEL] = f"{r['labels'].get(RULE_LABEL, '')} (#{i})"
        seen.add((r["record"], tuple(sorted(r["labels"].items()))))
    return rules


def pass3(wmap: WorkloadMap, cfg: RulesConfig, digest: str) -> list[dict[str, Any]]:
    """GPUs by pool, class, team and workload; activity and memory by pool."""
    def sel(metric: str, *m: str) -> str:
        return _sel(metric, (digest, cfg.interval_s * 1000), *m)

    on_dev = f"on ({p.by(DEVICE)})"
    frac = sel(DEVICE_FRACTION)
    pool = f"on ({NODE}) group_left (pool) {sel(NODE_POOL)}"
    labelled = sel(DEVICE_HOLDER, _ne("pod"))
    n_holders = f"count by ({p.by(DEVICE)}) ({labelled})"
    out = [_rec(DEVICE_SHARE, f"({labelled} * {on_dev} group_left () ({frac} / {on_dev} {n_holders})) * {pool}",
                digest)]
    at = (digest, cfg.interval_s * 1000)
    # the class and team records' expressions, not the records: read from the map's rank records,
    # the sums stay one backfill pass after them (five passes, not six)
    classed = (f"{sel(DEVICE_SHARE)} * on (namespace, pod) group_left (class, workload) "
               f"{first_match(CLASS_MATCH, HOLDER, at)} * on (namespace, pod) group_left (team) ({team_of(at)})")
    out.append(_rec(GPUS, f"sum by (pool, class, team, workload) ({classed})", digest))
    # A device without a pod label (DESIGN.md "GPU counting"), from an exporter in Kubernetes
    # mode: idle when its activity and memory are at or under the map's thresholds (and read),
    # unmanaged when above; from an exporter that never labels pods: unknown.
    unl = (f"(({sel(DEVICE_HOLDER, _eq('pod'))} unless {on_dev} {labelled}) * {on_dev} group_left () {frac})"
           f" * {pool}")
    k8s = f"on (job) group by (job) ({sel(JOB_K8S)})"
    busy = (f"(max by ({p.by(DEVICE)}) ({sel(DEVICE_ACTIVITY)} > {wmap.idle_activity_pct!r}) or "
            f"max by ({p.by(DEVICE)}) ({sel(DEVICE_FB_USED)} > {wmap.idle_memory_mib!r}))")
    read = f"(group by ({p.by(DEVICE)}) ({sel(DEVICE_ACTIVITY)}) or group by ({p.by(DEVICE)}) ({sel(DEVICE_FB_USED)}))"
    in_k8s = f"(({unl}) and {k8s})"
    out.append(_rec(GPUS, f"sum by (pool) (({in_k8s} and {on_dev} {read}) unless {on_dev} {busy})", digest,
                    **{"class": "idle"}))
    out.append(_rec(GPUS, f"sum by (pool) ({in_k8s} and {on_dev} {busy})", digest, **{"class": "unmanaged"}))
    out.append(_rec(GPUS, f"sum by (pool) ((({unl}) unless {k8s}) or ({in_k8s} unless {on_dev} {read}))", digest,
                    **{"class": "unknown"}))
    # MIG GPUs whose instances leave compute slices unconfigured: the rest is idle.
    mig = f"{frac} and {on_dev} {sel(DEVICE_HOLDER, _ne('GPU_I_PROFILE'))}"
    gpu_pool = f"group by (UUID, pool) (max by (UUID, {NODE}) ({sel(DEVICE_HOLDER)}) * {pool})"
    out.append(_rec(GPUS, f"sum by (pool) ((clamp_min(1 - sum by (UUID) ({mig}), 0) > 0) "
                          f"* on (UUID) group_left (pool) {gpu_pool})",
                    digest, **{"class": "idle", RULE_LABEL: "MIG slices no instance uses"}))
    dev_pool = f"max by ({p.by(DEVICE)}, pool) (group by ({p.by(DEVICE)}, {NODE}) ({sel(DEVICE_HOLDER)}) * {pool})"
    frac_pool = f"({frac} * {on_dev} group_left (pool) {dev_pool})"
    activity = f"max by ({p.by(DEVICE)}) ({sel(DEVICE_ACTIVITY)})"
    out.append(_rec(ACTIVITY_WEIGHTED, f"sum by (pool) ({activity} * {on_dev} group_left (pool) {frac_pool})", digest))
    out.append(_rec(ACTIVITY_WEIGHT, f"sum by (pool) ({frac_pool} and {on_dev} {activity})", digest))
    out.append(_rec(FB_USED, f"sum by (pool) ({sel(DEVICE_FB_USED)} * {pool})", digest))
    out.append(_rec(CLASS_ACTIVITY, f"sum by (pool, class, team) (({classed}) * {on_dev} group_left () {activity})",
                    digest))
    return out


@dataclass(frozen=True)
class Recorded:
    """A raw-path pull query the rules record: the recorded name and how a pull reads it."""

    key: str  # the PullQuery key of analytics.promql.timeline_queries
    record: str
    increase: bool  # per-interval increases: a pull sums them over its step


def recorded_name(pq_key: str, promql: str) -> str:
    """``level:metric:operations`` for a pull query: its level the labels it keeps.

    >>> recorded_name("keep:kube_deployment_status_replicas_ready", "max by (namespace, deployment) (x)")
    'namespace_deployment:kube_deployment_status_replicas_ready:last'
    >>> recorded_name("svc:vllm:e2e_request_latency_seconds_bucket", "sum by (service, le) (x)")
    'service_le:vllm_e2e_request_latency_seconds_bucket:increase'
    """
    kind, _, name = pq_key.partition(":")
    if kind == "svc":  # by service (its label spellings and the workload it falls back to)
        level = "service_le" if name.endswith("_bucket") else "service"
    else:
        level = "_".join(x.strip() for x in re.search(r"by \(([^)]*)\)", promql).group(1).split(","))
    op = "last" if kind == "keep" else "sum" if not name.endswith(("_bucket", "_count", "_total")) else "increase"
    return f"{level}:{name.replace(':', '_')}:{op}"


def signal_rules(cfg: RulesConfig) -> list[tuple[Recorded, str]]:
    """The service, autoscaler and Kueue queries of a live pull, evaluated every interval."""
    out = []
    for pq in lq.timeline_queries(cfg.interval_s * 1000):
        if pq.key.startswith("dev:") or pq.key.startswith("pod:"):
            continue  # devices: the map's passes; the +Inf bucket per pod stays a raw pull
        if pq.key.startswith("keep:") and (pq.signal == "pod_gpu_requests" or pq.metric == s.KSM_POD_INFO):
            continue  # one series per pod either way: nothing to sum
        rec = Recorded(pq.key, recorded_name(pq.key, pq.promql), pq.accumulate)
        out.append((rec, pq.promql))
    return out


def compile_rules(wmap: WorkloadMap, cfg: RulesConfig = RulesConfig()) -> dict[str, Any]:
    """The rules file (as a dict for ``yaml.safe_dump``): three groups, evaluated in this order.

    Each rule of the map is written once (:func:`_ranked`): the rules grow linearly with the map.
    Its patterns were checked as Go's regexp reads them when the map was built
    (:mod:`analytics.patterns`).

    Raises
    ------
    ConfigError
        An interval under 1s.
    """
    if cfg.interval_s < 1:
        raise ConfigError(f"interval {cfg.interval_s}s: give at least 1s")
    digest = map_digest(wmap, cfg)
    interval = f"{cfg.interval_s}s"
    signals = [_rec(rec.record, expr, digest) for rec, expr in signal_rules(cfg)]
    rules = pass1(cfg, digest) + signals + pass2(wmap, cfg, digest) + pass3(wmap, cfg, digest)
    return {"groups": [{"name": GROUP, "interval": interval, "rules": rules}]}


def passes(doc: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The rules of :func:`compile_rules` cut into backfill passes: a rule goes one pass after
    the last rule whose record it reads (``promtool tsdb create-blocks-from rules`` evaluates
    a group's rules without seeing each other's results). Each pass keeps the group's name,
    so that written to the same file it is evaluated at the same times as the others."""
    level: dict[str, int] = {}
    out: list[list[dict[str, Any]]] = []
    for rule in (r for g in doc["groups"] for r in g["rules"]):
        reads = [n for n in level if re.search(rf"(?<![\w:]){re.escape(n)}(?![\w:])", rule["expr"])]
        lv = 1 + max((level[n] for n in reads), default=-1)
        level[rule["record"]] = max(level.get(rule["record"], 0), lv)
        while len(out) <= lv:
            out.append([])
        out[lv].append(rule)
    return out


def eval_offset_s(rules_file: str, group: str, interval_s: int) -> float:
    """Seconds into each interval at which Prometheus (and promtool's backfill) evaluates a
    group: a hash of the group's name and its rules file's path, as the path is given to
    promtool (``rules.Group.hash``: xxhash64 of the two labels ``file`` and ``name``).

    >>> round(eval_offset_s("/tmp/s41/r256b/tidelens.rules.yml", "tidelens", 60), 3)
    59.668
    """
    import xxhash

    key = b"file\xff" + rules_file.encode() + b"\xffname\xff" + group.encode() + b"\xff"
    return xxhash.xxh64_intdigest(key) % (interval_s * 10**9) / 1e9


BLOCK_S = 7200  # promtool's backfill writes 2-hour blocks


def backfill_drops_evaluations(rules_file: str, group: str, interval_s: int) -> bool:
    """Whether ``promtool tsdb create-blocks-from rules`` (2.42 to at least 3.x) skips an
    evaluation at the end of its 2-hour blocks for this file and group: it ends each block's
    range query at the block's last whole second, so an evaluation in the block's final
    second (``eval_offset_s`` within a second of the interval's end) is never made, and the
    recorded series miss one step per block. Name the rules file so this is False.

    >>> backfill_drops_evaluations("/tmp/s41/r256b/tidelens.rules.yml", "tidelens", 60)
    True
    >>> backfill_drops_evaluations("/tmp/s41/r256/tidelens.rules.yml", "tidelens", 60)
    False
    """
    offset = eval_offset_s(rules_file, group, interval_s)
    # block ends are multiples of BLOCK_S; evaluations at offset + k * interval (from the epoch)
    return any(((b * BLOCK_S - 1 - offset) % interval_s) > interval_s - 1
               for b in range(interval_s // math.gcd(interval_s, BLOCK_S)))


def rules_yaml(wmap: WorkloadMap, cfg: RulesConfig = RulesConfig(), doc: dict[str, Any] | None = None) -> str:
    """:func:`compile_rules` (``doc``, when compiled already) as YAML, headed by what it is and the
    map's digest. Written by libyaml (the same text as PyYAML's Python emitter, 6x faster)."""
    import yaml

    doc = compile_rules(wmap, cfg) if doc is None else doc
    head = (f"# Tidelens workload map as recording rules (map digest {map_digest(wmap, cfg)}).\n"
            "# One group, its rules in order (later rules read earlier ones). To backfill, run\n"
            "# `promtool tsdb create-blocks-from rules` in passes: see docs/rules.md.\n")
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return head + yaml.dump(doc, Dumper=dumper, sort_keys=False, allow_unicode=True, width=100_000)
