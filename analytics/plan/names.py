"""Kubernetes names for a plan: team names mapped to valid namespaces, and the namespaces a
plan must never own.

Every name a plan writes is a DNS-1123 *label* (lower-case letters, digits and ``-``, starting
and ending with a letter or digit, 63 characters at most). That is the rule of the strictest
object a team's name reaches, its Namespace; the ClusterQueue, LocalQueue, ResourceFlavor,
WorkloadPriorityClass and KAI Queue names only need a DNS-1123 subdomain as objects, but a
LocalQueue's, a WorkloadPriorityClass's and a KAI Queue's name are also written as label values
(``kueue.x-k8s.io/queue-name``, ``kueue.x-k8s.io/priority-class``, ``kai.scheduler/queue``),
which allow 63 characters at most. One rule for all keeps every name usable everywhere.

Team names come from a scenario (a TOML file, a store's labels): :func:`map_teams` maps each to
a label deterministically and says why it changed; :func:`system_namespace` names the
namespaces a plan leaves alone (``kubectl delete -f`` on a plan that wrote ``kube-system`` as a
Namespace object would delete it).

>>> k8s_name("ML_Research Team!"), k8s_name(7), k8s_name("Équipe")
('ml-research-team', '7', 'equipe')
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field

LIMIT = 63
_NAME_BAD = re.compile(r"[^a-z0-9-]+")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_HASH = 10  # hex digits of the suffix a cut or colliding name gets

# Namespaces a plan never writes as a Namespace object, and never makes a queue's home unless
# asked: Kubernetes's own, and those of the components the plan relies on (deleting any of them
# takes the cluster, the GPU Operator or the scheduler with it).
SYSTEM_NAMESPACES = {
    "default": "the cluster's default namespace",
    "kube-system": "Kubernetes's own (kube-*)",
    "kube-public": "Kubernetes's own (kube-*)",
    "kube-node-lease": "Kubernetes's own (kube-*)",
    "gpu-operator": "the NVIDIA GPU Operator's (the plan's device configs go there)",
    "kueue-system": "Kueue's controller's",
    "kai-scheduler": "the KAI Scheduler's",
    "openshift": "OpenShift's own (openshift-*)",
}
SYSTEM_PREFIXES = {"kube-": "Kubernetes's own (kube-*)", "openshift-": "OpenShift's own (openshift-*)"}


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]


def _clean(raw: str) -> str:
    folded = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode("ascii")
    return _NAME_BAD.sub("-", folded.lower()).strip("-")


def k8s_name(text: object, *, limit: int = LIMIT) -> str:
    """A DNS-1123 label from any value (a number is read as its text): accents dropped, lower
    case, runs of other characters become ``-``, no leading or trailing ``-``; longer than
    ``limit`` is cut and given a hash suffix (two long names never collide); an empty result is
    ``team-<hash>``.

    >>> k8s_name("Team A/B"), k8s_name("---"), len(k8s_name("x" * 80))
    ('team-a-b', 'team-58b63e273b', 63)
    """
    raw = str(text)
    out = _clean(raw)
    if not out:
        return f"team-{_digest(raw)}"
    if len(out) > limit:
        out = with_hash(out, raw, limit=limit)
    return out


def with_hash(base: str, text: str, *, limit: int = LIMIT) -> str:
    """``base`` cut to fit ``limit`` with ``-<hash of text>`` appended (still a label)."""
    return base[: limit - _HASH - 1].rstrip("-") + "-" + _digest(text)


def is_k8s_name(name: object) -> bool:
    """Whether ``name`` is a DNS-1123 label.

    >>> is_k8s_name("team-a"), is_k8s_name("Team-A"), is_k8s_name("a-"), is_k8s_name("a" * 64)
    (True, False, False, False)
    """
    return isinstance(name, str) and len(name) <= LIMIT and _LABEL.fullmatch(name) is not None


def system_namespace(name: str) -> str | None:
    """Why ``name`` is a system namespace, or None when a plan may own it.

    >>> system_namespace("kube-flannel"), system_namespace("team-a")
    ("Kubernetes's own (kube-*)", None)
    """
    if name in SYSTEM_NAMESPACES:
        return SYSTEM_NAMESPACES[name]
    return next((why for prefix, why in SYSTEM_PREFIXES.items() if name.startswith(prefix)), None)


@dataclass
class TeamNames:
    """The namespaces of a plan's teams (teams by their text, as the scenario spells them)."""

    names: dict[str, str]  # team -> its namespace
    changed: dict[str, str] = field(default_factory=dict)  # team -> why its name is not its own
    system: dict[str, str] = field(default_factory=dict)  # team -> why its namespace is a system one


def map_teams(teams: list[object], *, taken: tuple[str, ...] = ()) -> TeamNames:
    """Each team's namespace, deterministically, whatever order the teams come in.

    A team already spelled as a valid name keeps it; any other is mapped by :func:`k8s_name`.
    When several teams map to one name (or to one of ``taken``, the plan's own namespaces), the
    team spelled that way keeps it, else the first in sorted order, and every other gets a hash
    of its own text appended (so a hashed name depends on nothing but the team's own text).

    >>> m = map_teams(["Team A", "Team_A", "team-a", "tidelens-system"], taken=("tidelens-system",))
    >>> m.names["team-a"], m.names["Team A"] != m.names["Team_A"], m.names["tidelens-system"][:16]
    ('team-a', True, 'tidelens-system-')
    """
    keys = sorted(dict.fromkeys(str(t) for t in teams))
    base = {t: k8s_name(t) for t in keys}
    out = TeamNames(names={})
    used = set(taken)
    # Exact spellings first, then the rest in sorted order: who keeps a contested name.
    for team in sorted(keys, key=lambda t: (base[t] != t, t)):
        name = base[team]
        if name != team:
            clean = _clean(team)
            out.changed[team] = ("no letter or digit to keep: 'team-' and a hash of the name" if not clean
                                 else "longer than 63 characters: cut, with a hash of the name appended"
                                 if len(clean) > LIMIT else
                                 "not a valid Kubernetes name: lower-cased, other characters "
                                 "became '-'")
        if name in used:
            why = ("the plan's own namespace" if name in taken else
                   f"{name!r} is another team's")
            k = 0
            while name in used:  # a second hash collision is astronomically unlikely; stay sure
                name = with_hash(base[team], team if k == 0 else f"{team}#{k}")
                k += 1
            out.changed[team] = f"{why}: a hash of the name appended"
        used.add(name)
        out.names[team] = name
        why_system = system_namespace(name)
        if why_system:
            out.system[team] = why_system
    return TeamNames(names={t: out.names[t] for t in keys},
                     changed={t: out.changed[t] for t in keys if t in out.changed},
                     system={t: out.system[t] for t in keys if t in out.system})
