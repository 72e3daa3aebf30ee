"""The plan one policy makes (:class:`Plan`): its objects by file, the modelled numbers they
carry, the team names they use and what the README says about them; :func:`analytics.plan.make_plan`
fills it, :mod:`~analytics.plan.readme` and :mod:`~analytics.plan.write` read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Plan:
    """The objects of one policy, by file, and what the README says about them."""

    policy: str
    files: dict[str, list[dict[str, Any]]]
    numbers: dict[str, Any]  # the modelled numbers the objects carry
    names: dict[str, str]  # team (as text) -> the namespace it became
    notes: list[str] = field(default_factory=list)  # per file: what it enforces
    readme: str = ""
    renamed: dict[str, str] = field(default_factory=dict)  # team -> why its namespace differs
    system: dict[str, str] = field(default_factory=dict)  # team -> why its namespace is a system one
    allow_system_namespaces: bool = False

    def objects(self) -> list[dict[str, Any]]:
        return [o for objs in self.files.values() for o in objs]

    def system_effect(self) -> str:
        """What the plan does for a team whose namespace is a system one (plain text)."""
        if self.numbers.get("scheduler") == "kai":
            return ("no Namespace object is written for it (KAI's queues are cluster-wide: its pods "
                    "still name their queue)")
        if self.allow_system_namespaces:
            return ("its LocalQueue is written there (--allow-system-namespaces), but no Namespace "
                    "object: the namespace is the cluster's")
        return ("skipped: no Namespace object and no LocalQueue are written for it, so its workloads "
                "get no queue; rename the team, or make the plan again with --allow-system-namespaces "
                "to put its LocalQueue there")

    def name_messages(self) -> list[str]:
        """One plain line per renamed team or team in a system namespace, for a terminal (teams
        by ``repr``, so a control character or a newline shows as an escape)."""
        out = [f"team {team!r} -> namespace {self.names[team]} ({why})" for team, why in self.renamed.items()]
        out += [f"team {team!r}: namespace {self.names[team]} is {why}; {self.system_effect()}"
                for team, why in self.system.items()]
        return out
