"""The workload map: which workload a pod belongs to, and its class, team, pool and latency class.

Rules over labels (``namespace``, ``pod``, ``workload``, ``container``, ``priority_class``,
``hostname``, ``service``) set any of ``class`` (``inference`` / ``batch`` / ``other``), ``team``,
``pool``, ``latency_class`` (A reserved inference, B soft-shared, C spot/interruptible) and
``slo_metric``. For each field the first rule that matches and sets it decides: the user's rules
(in file order) first, then the built-in defaults, which classify common names with no
configuration. A ``Decision`` names the rule that decided the class.

The map is read from and written to ``tidelens.toml``::

    [map]
    default_pool = "default"
    use_builtin_rules = true

    [[rule]]
    name = "serving nodes"
    hostname = "gpu-node-0[0-3]"      # Python regex, matched against the whole value
    pool = "serving"

    [[rule]]
    name = "recsys serves"
    namespace = "recsys"
    class = "inference"
    team = "recsys"
    slo_metric = "http_server_request_duration_seconds"
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import polars as pl
import tomli_w

from analytics.config import keep_previous, read_config
from analytics.errors import ConfigError
from analytics.patterns import check_go_pattern, compile_pattern
from analytics.sql import workloads as qw

if TYPE_CHECKING:
    from analytics.store import Store

CLASSES: tuple[str, ...] = ("inference", "batch", "other")
LATENCY_CLASSES: tuple[str, ...] = ("A", "B", "C")
MATCH_KEYS: tuple[str, ...] = ("namespace", "pod", "workload", "container", "priority_class",
                               "hostname", "service", "serves")
SET_KEYS: tuple[str, ...] = ("class", "team", "pool", "latency_class", "slo_metric")

# Pod-name suffixes Kubernetes controllers add; stripping them gives the workload.
# ReplicaSet hashes and random suffixes use this alphabet (no vowels; k8s.io/apimachinery rand).
_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
# ASCII digits, as RE2 (Prometheus' label_replace of the same patterns, analytics/rules) reads \d.
_POD_SUFFIXES: tuple[re.Pattern[str], ...] = tuple(re.compile(x, re.ASCII) for x in (
    rf"^(?P<w>.+)-{_SAFE}{{6,10}}-{_SAFE}{{5}}$",  # Deployment: name-<rs hash>-<pod>
    r"^(?P<w>.+)-(?:worker|master|launcher|ps|chief|evaluator|driver|executor|head)-\d+(?:-"
    + _SAFE + r"{5})?$",  # training operators (PyTorchJob, MPIJob, Ray, Spark)
    rf"^(?P<w>.+)-\d+-{_SAFE}{{5}}$",  # indexed Job: name-<index>-<random>
    r"^(?P<w>.+)-\d+$",  # StatefulSet ordinal / Job index
    rf"^(?P<w>.+)-{_SAFE}{{5}}$",  # Job / DaemonSet pod: name-<random>
))

_BATCH_WORDS = r"(?:^|[-_./])(?:train|finetun|fine-tun|batch|pretrain|(?:ft|job|jobs|eval|sweep|etl)(?:$|[-_./\d]))"
_INFER_WORDS = (r"(?:^|[-_./])(?:serv|infer|vllm|triton|tgi|sglang|predict|kserve|"
                r"(?:api|llm|online)(?:$|[-_./\d]))")
_OTHER_WORDS = r"(?:^|[-_./])(?:dev|notebook|jupyter|interactive|sandbox|debug)"
_BATCH_PRIORITY = r".*(?:train|batch|preempt|spot|best-?effort|interrupt|scaveng).*"
_INFER_PRIORITY = r".*(?:infer|serv|online|latency|realtime|high).*"


def workload_of_pod(pod: str | None) -> str | None:
    """The workload a pod belongs to: its name without the controller's suffix.

    >>> workload_of_pod("chat-vllm-7d9c8b6f5-x2k4q"), workload_of_pod("nightly-finetune-3")
    ('chat-vllm', 'nightly-finetune')
    >>> workload_of_pod("train-llm-worker-2"), workload_of_pod("batch-etl-x7z2k")
    ('train-llm', 'batch-etl')
    """
    if not pod:
        return None
    for pattern in _POD_SUFFIXES:
        m = pattern.fullmatch(pod)  # `$` alone also matches before a final newline; RE2's does not
        if m:
            return m.group("w")
    return pod


@dataclass
class Rule:
    """One rule: regexes over labels (all must match the whole value) and what it sets."""

    name: str = field(metadata={"help": "shown as the reason for a decision"})
    match: dict[str, str] = field(default_factory=dict, metadata={
        "help": f"label -> Python regex matched against the whole value; labels: {', '.join(MATCH_KEYS)}"})
    cls: str | None = field(default=None, metadata={"help": "workload class: inference, batch or other"})
    team: str | None = field(default=None, metadata={
        "help": "owning team; '{namespace}' or '{workload}' are replaced by that label"})
    pool: str | None = field(default=None, metadata={"help": "GPU pool (match on hostname to place nodes)"})
    latency_class: str | None = field(default=None, metadata={
        "help": "A reserved inference, B soft-shared, C spot/interruptible"})
    slo_metric: str | None = field(default=None, metadata={
        "help": "histogram whose p99 is the service's SLO latency"})
    builtin: bool = field(default=False, metadata={"help": "a built-in default, not saved to tidelens.toml"})

    def __post_init__(self) -> None:
        for key, pattern in self.match.items():
            if key not in MATCH_KEYS:
                raise ConfigError(f"rule {self.name!r}: cannot match on {key!r}; use one of {', '.join(MATCH_KEYS)}")
        if self.cls is not None and self.cls not in CLASSES:
            raise ConfigError(f"rule {self.name!r}: class {self.cls!r} is not one of {', '.join(CLASSES)}")
        if self.latency_class is not None and self.latency_class not in LATENCY_CLASSES:
            raise ConfigError(f"rule {self.name!r}: latency_class {self.latency_class!r} is not one of A, B, C")
        # Python matches with RE2; the recording rules with Go's regexp: a pattern is taken only
        # when both read it alike (analytics.patterns), refused here with the rule's name, so a
        # map that loads or saves also exports.
        self._compiled = {}
        for key, pattern in self.match.items():
            what = f"rule {self.name!r}: {key}"
            self._compiled[key] = compile_pattern(pattern, what)
            check_go_pattern(pattern, what)

    def matches(self, labels: Mapping[str, str | None]) -> bool:
        for key, rx in self._compiled.items():
            value = labels.get(key)
            if value is None or not rx.fullmatch(value):
                return False
        return True

    def sets(self, key: str) -> Any:
        return self.cls if key == "class" else getattr(self, key)


@functools.cache
def _builtin_rules() -> tuple[Rule, ...]:
    return tuple(builtin_rules())


def builtin_rules() -> list[Rule]:
    """Defaults that classify common names with no configuration.

    Order: the scheduler's priority class (Kueue/K8s, e.g. ``inference-high``,
    ``training-low``, ``dev-low``), then the workload's name, then whether its pods report
    request-latency histograms (``serves``: a pod that does serves requests), then its namespace; interactive
    words (dev, notebook, jupyter) first, then batch words, so ``batch-inference`` is batch.
    Team defaults to the namespace; latency class follows the class (inference A, other B,
    batch C).
    """
    rules = [
        Rule("default: interactive priority class", {"priority_class": rf".*{_OTHER_WORDS}.*"}, cls="other",
             builtin=True),
        Rule("default: batch priority class", {"priority_class": _BATCH_PRIORITY}, cls="batch", builtin=True),
        Rule("default: inference priority class", {"priority_class": _INFER_PRIORITY}, cls="inference", builtin=True),
        Rule("default: interactive name", {"workload": rf".*{_OTHER_WORDS}.*"}, cls="other", builtin=True),
        Rule("default: batch name", {"workload": rf".*{_BATCH_WORDS}.*"}, cls="batch", builtin=True),
        Rule("default: inference name", {"workload": rf".*{_INFER_WORDS}.*"}, cls="inference", builtin=True),
        # A pod that reports request-latency histograms serves requests, whatever its name.
        Rule("default: reports request latency", {"serves": "true"}, cls="inference", builtin=True),
        Rule("default: batch namespace", {"namespace": rf".*{_BATCH_WORDS}.*"}, cls="batch", builtin=True),
        Rule("default: inference namespace", {"namespace": rf".*{_INFER_WORDS}.*"}, cls="inference", builtin=True),
        Rule("default: team is namespace", {"namespace": ".+"}, team="{namespace}", builtin=True),
        Rule("default: other", {}, cls="other", builtin=True),
    ]
    return rules


_LATENCY_BY_CLASS = {"inference": "A", "other": "B", "batch": "C"}


@dataclass
class AutoscalerRule:
    """The user's word on which service an HPA scales, where its name does not say.

    In ``tidelens.toml``::

        [[autoscaler]]
        hpa = "frontend-autoscaler"     # Python regex, matched against the whole HPA name
        namespace = "llm"               # optional regex
        service = "chat-api-vllm"       # the service (its pods' workload) the HPA scales
    """

    hpa: str = field(metadata={"help": "regex matched against the whole HPA name"})
    service: str = field(metadata={"help": "the service (its pods' workload, or its service label) the HPA scales"})
    namespace: str | None = field(default=None, metadata={"help": "regex matched against the HPA's namespace"})
    name: str = field(default="", metadata={"help": "shown as the rule that made the link"})

    def __post_init__(self) -> None:
        label = self.name or f"autoscaler {self.hpa!r}"
        self._hpa = compile_pattern(self.hpa, f"[[autoscaler]] {label}: hpa", ignore_case=False)
        self._ns = (compile_pattern(self.namespace, f"[[autoscaler]] {label}: namespace", ignore_case=False)
                    if self.namespace is not None else None)
        if not self.service:
            raise ConfigError(f"[[autoscaler]] {label}: say which service it scales (service = \"...\")")
        if not self.name:
            self.name = f"tidelens.toml: HPA {self.hpa} scales {self.service}"

    def matches(self, hpa: str, namespace: str | None) -> bool:
        if not self._hpa.fullmatch(hpa):
            return False
        return self._ns is None or (namespace is not None and self._ns.fullmatch(namespace) is not None)


@dataclass
class WorkloadMap:
    """The user's rules plus the defaults; what ``tidelens.toml`` holds."""

    rules: list[Rule] = field(default_factory=list, metadata={"help": "the user's rules, first match wins"})
    default_pool: str = field(default="default", metadata={"help": "pool of GPUs no rule places"})
    use_builtin_rules: bool = field(default=True, metadata={
        "help": "after the user's rules, apply the built-in name defaults"})
    autoscalers: list[AutoscalerRule] = field(default_factory=list, metadata={
        "help": "which service an HPA scales, where no label or name says (first match wins)"})
    idle_activity_pct: float = field(default=5.0, metadata={
        "help": "a GPU with no pod label, from an exporter that labels pods elsewhere (Kubernetes mode) and "
                "no kube-state-metrics to say, is idle at or below this activity (GR_ENGINE_ACTIVE or "
                "GPU_UTIL, %); above it, someone outside Kubernetes uses it (unmanaged)"})
    idle_memory_mib: float = field(default=1024.0, metadata={
        "help": "... and at or below this much GPU memory used (MiB): a context holding memory is a user"})

    def all_rules(self) -> list[Rule]:
        return [*self.rules, *(_builtin_rules() if self.use_builtin_rules else
                               [Rule("default: other", {}, cls="other", builtin=True)])]


@dataclass(frozen=True)
class Decision:
    """What the map decided for one workload, and the rule that decided its class."""

    workload: str | None
    cls: str
    team: str | None
    pool: str
    latency_class: str
    rule: str
    slo_metric: str | None = None


def classify(wmap: WorkloadMap, labels: Mapping[str, str | None]) -> Decision:
    """Classify one label set.

    ``labels`` may hold any of :data:`MATCH_KEYS`; ``workload`` is derived from ``pod`` when
    absent. A ``team`` label, when present, is the default team.

    >>> d = classify(WorkloadMap(), {"namespace": "ml-training", "pod": "nightly-finetune-0"})
    >>> (d.workload, d.cls, d.team, d.latency_class, d.rule)
    ('nightly-finetune', 'batch', 'ml-training', 'C', 'default: batch name')
    """
    lab = {k: (v if v else None) for k, v in labels.items()}
    if not lab.get("workload"):
        lab["workload"] = workload_of_pod(lab.get("pod")) or lab.get("service")
    decided: dict[str, Any] = {}
    rule_name = "default: other"
    for rule in wmap.all_rules():
        todo = [k for k in SET_KEYS if k not in decided and rule.sets(k) is not None]
        if not todo or not rule.matches(lab):
            continue
        for key in todo:
            if key == "team" and rule.builtin and lab.get("team"):
                decided[key] = lab["team"]
                continue
            value = rule.sets(key)
            if key == "team":
                value = value.replace("{namespace}", lab.get("namespace") or "").replace(
                    "{workload}", lab.get("workload") or "") or None
            decided[key] = value
            if key == "class":
                rule_name = rule.name
        if len(decided) == len(SET_KEYS):
            break
    cls = decided.get("class", "other")
    return Decision(workload=lab.get("workload"), cls=cls, team=decided.get("team") or lab.get("team"),
                    pool=decided.get("pool") or wmap.default_pool,
                    latency_class=decided.get("latency_class") or _LATENCY_BY_CLASS[cls],
                    rule=rule_name, slo_metric=decided.get("slo_metric"))


def pool_of_host(wmap: WorkloadMap, hostname: str | None) -> str:
    """The pool a node's GPUs belong to: the first rule setting ``pool`` that matches on the
    hostname alone (so a GPU never changes pool with its holder)."""
    lab = {"hostname": hostname}
    for rule in wmap.rules:
        if rule.pool is not None and rule.match and set(rule.match) <= {"hostname"} and rule.matches(lab):
            return rule.pool
    return wmap.default_pool


# -- tidelens.toml ------------------------------------------------------------------------------
_MAP_KEYS = ("default_pool", "use_builtin_rules", "idle_activity_pct", "idle_memory_mib")
_TOML_SET = {"class": "cls", "team": "team", "pool": "pool", "latency_class": "latency_class",
             "slo_metric": "slo_metric"}


def _line_of(text: str, values: list[Any]) -> str:
    """``:N`` for the first line of ``text`` that sets one of ``values`` (most telling first: the
    patterns a rule matches with, then its name), else ``""``: tomllib gives values, not lines."""
    for v in (x for x in values if isinstance(x, str) and x):
        quoted = ('"' + v + '"', "'" + v + "'")
        for n, line in enumerate(text.splitlines(), start=1):
            if "=" in line and line.split("=", 1)[1].strip() in quoted:
                return f":{n}"
    return ""


def load_map(path: str | Path | None) -> WorkloadMap:
    """Read a workload map from ``tidelens.toml``; the defaults alone when ``path`` is None or missing.

    Raises
    ------
    ConfigError
        Naming the file, the rule and what to change, for invalid TOML, unknown keys, bad
        regexes, classes or latency classes.
    """
    if path is None or not Path(path).exists():
        return WorkloadMap()

    p = Path(path)
    doc = read_config(p)
    text = p.read_text(encoding="utf-8")  # rule line numbers for messages (tomllib gives values)
    head = doc.get("map", {})
    unknown = set(head) - set(_MAP_KEYS)
    if unknown:
        raise ConfigError(f"{p}: [map] has unknown keys {sorted(unknown)}; allowed: {', '.join(_MAP_KEYS)}")
    for key in ("idle_activity_pct", "idle_memory_mib"):
        if key in head and (not isinstance(head[key], (int, float)) or isinstance(head[key], bool) or head[key] < 0):
            raise ConfigError(f"{p}: [map] {key} = {head[key]!r}: give a number at least 0")
    rules = []
    for i, raw in enumerate(doc.get("rule", []), start=1):
        name = str(raw.get("name") or f"rule {i}")
        unknown = set(raw) - {"name", *MATCH_KEYS, *SET_KEYS}
        if unknown:
            raise ConfigError(f"{p}: [[rule]] #{i} ({name}) has unknown keys {sorted(unknown)}; "
                              f"match on {', '.join(MATCH_KEYS)} and set {', '.join(SET_KEYS)}")
        try:
            rules.append(Rule(name=name,
                              match={k: str(raw[k]) for k in MATCH_KEYS if k in raw},
                              **{attr: raw.get(key) for key, attr in _TOML_SET.items()}))
        except ConfigError as exc:
            where = _line_of(text, [*(raw.get(k) for k in MATCH_KEYS), raw.get("name")])
            raise ConfigError(f"{p}{where}: [[rule]] #{i}: {exc}") from exc
    scalers = []
    for i, raw in enumerate(doc.get("autoscaler", []), start=1):
        unknown = set(raw) - {"name", "hpa", "namespace", "service"}
        if unknown or "hpa" not in raw or "service" not in raw:
            raise ConfigError(f"{p}: [[autoscaler]] #{i}: needs hpa and service (and optionally namespace, name); "
                              f"found keys {sorted(raw)}")
        try:
            scalers.append(AutoscalerRule(hpa=str(raw["hpa"]), service=str(raw["service"]),
                                          namespace=str(raw["namespace"]) if "namespace" in raw else None,
                                          name=str(raw.get("name") or "")))
        except ConfigError as exc:
            where = _line_of(text, [raw.get("hpa"), raw.get("namespace"), raw.get("name")])
            raise ConfigError(f"{p}{where}: [[autoscaler]] #{i}: {exc}") from exc
    defaults = WorkloadMap()
    return WorkloadMap(rules=rules, default_pool=str(head.get("default_pool", "default")),
                       use_builtin_rules=bool(head.get("use_builtin_rules", True)), autoscalers=scalers,
                       idle_activity_pct=float(head.get("idle_activity_pct", defaults.idle_activity_pct)),
                       idle_memory_mib=float(head.get("idle_memory_mib", defaults.idle_memory_mib)))


def map_to_dict(wmap: WorkloadMap) -> dict[str, Any]:
    """The TOML document of a map (user rules only; built-in defaults are implied)."""
    out_rules = []
    for rule in wmap.rules:
        if rule.builtin:
            continue
        entry: dict[str, Any] = {"name": rule.name, **rule.match}
        for key, attr in _TOML_SET.items():
            if getattr(rule, attr) is not None:
                entry[key] = getattr(rule, attr)
        out_rules.append(entry)
    scalers = [{k: v for k, v in (("name", a.name), ("hpa", a.hpa), ("namespace", a.namespace),
                                   ("service", a.service)) if v is not None} for a in wmap.autoscalers]
    return {"map": {"default_pool": wmap.default_pool, "use_builtin_rules": wmap.use_builtin_rules,
                    "idle_activity_pct": wmap.idle_activity_pct, "idle_memory_mib": wmap.idle_memory_mib},
            "rule": out_rules, "autoscaler": scalers}


def map_digest(wmap: WorkloadMap) -> str:
    """A short digest of what a map decides (its TOML document, canonical): the audit record's
    before and after, and what events and reviews name as the map they were computed with.

    >>> map_digest(load_map(None)) == map_digest(load_map(None))
    True
    """
    import hashlib

    import orjson

    doc = orjson.dumps(map_to_dict(wmap), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(doc).hexdigest()[:16]


def save_map(wmap: WorkloadMap, path: str | Path) -> None:
    """Write a map to ``tidelens.toml`` (atomically: a temp file renamed over the old one),
    keeping the file's other sections (``[access]``, ``[live]``, ``[slo]``, ``[app]``) and its
    previous version beside it (:func:`analytics.config.keep_previous`)."""

    p = Path(path)
    doc = {k: v for k, v in read_config(p).items() if k not in ("map", "rule", "autoscaler")}
    doc.update(map_to_dict(wmap))
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(tomli_w.dumps(doc), encoding="utf-8")
    keep_previous(p)
    tmp.replace(p)


# -- the store's workloads ---------------------------------------------------------------------
def pod_labels(store: "Store") -> pl.DataFrame:
    """Distinct pods in the store with the labels rules match on (no per-sample work)."""
    return store.query(qw.POD_LABELS)


def classify_pods(store: "Store", wmap: WorkloadMap) -> pl.DataFrame:
    """One row per ``(namespace, pod)``: its workload and decision."""
    pods = pod_labels(store)
    rows = []
    for r in pods.iter_rows(named=True):
        d = classify(wmap, r)
        rows.append({"namespace": r["namespace"], "pod": r["pod"], "workload": d.workload, "cls": d.cls,
                     "team": d.team, "pool": d.pool, "latency_class": d.latency_class, "rule": d.rule,
                     "slo_metric": d.slo_metric, "priority_class": r.get("priority_class"),
                     "container": r.get("container"), "hostname": r.get("hostname")})
    schema = {"namespace": pl.Utf8, "pod": pl.Utf8, "workload": pl.Utf8, "cls": pl.Utf8, "team": pl.Utf8,
              "pool": pl.Utf8, "latency_class": pl.Utf8, "rule": pl.Utf8, "slo_metric": pl.Utf8,
              "priority_class": pl.Utf8, "container": pl.Utf8, "hostname": pl.Utf8}
    return pl.DataFrame(rows, schema=schema)


def classify_workloads(store: "Store", wmap: WorkloadMap) -> pl.DataFrame:
    """Distinct workloads in the store with their decision and the rule that decided it.

    Returns
    -------
    polars.DataFrame
        ``namespace, workload, pods, cls, team, pool, latency_class, rule, slo_metric``.
    """
    pods = classify_pods(store, wmap)
    return (pods.group_by("namespace", "workload")
            .agg(pl.col("pod").n_unique().alias("pods"),
                 *(pl.col(c).drop_nulls().mode().sort().first().alias(c)
                   for c in ("cls", "team", "pool", "latency_class", "rule", "slo_metric")))
            .sort("namespace", "workload", nulls_last=True))
