"""The alerts' annotations: each written once, as parts of text and :class:`Field` s, which
:func:`go_template` turns into Prometheus' Go template and :func:`render` into the same text from
Python values (the tests' expected pages); and what a page tells its reader to do under each
policy (:data:`POLICY_ACTIONS`, :data:`SURGE_ACTION`). :mod:`analytics.rules.alerts` writes the
texts (``annotation_parts``) and the rules that carry them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

POLICY_ACTIONS: dict[str, str] = {
    "shared": "Free GPUs for {service}: ask team {batch_team} to checkpoint {batch_workload} and scale it down "
              "(or suspend its Kueue workload). Afterwards, compare priority preemption and a tidal window on "
              "Tidelens' What-if page.",
    "polite": "Batch should have released its GPUs at the release hour: {batch_workload} (team {batch_team}) still "
              "holds them. Have it checkpoint and release now, and check its release job.",
    "preemption": "Inference should have preempted {batch_workload}: check that its WorkloadPriorityClass is below "
                  "{service}'s and that the ClusterQueue's preemption allows it (withinClusterQueue, "
                  "reclaimWithinCohort); evict it by hand meanwhile.",
    "tidal": "{batch_workload} (team {batch_team}) overran the batch window: drain it now (checkpoint, then scale "
             "to zero) and check the window's drain job.",
    "partitioned": "Batch holds GPUs of inference's reservation: {batch_workload} (team {batch_team}) is outside "
                   "its quota. Check the ClusterQueue's nominalQuota and borrowingLimit; evict it meanwhile.",
    "mig": "Batch holds the MIG slices inference needs: check the mig-parted layout and {batch_workload}'s "
           "resource requests; move it off the inference profile.",
    "timeslice": "Batch holds the time-sliced GPUs inference needs: scale {batch_workload} (team {batch_team}) "
                 "down or move it off the shared nodes.",
}
SURGE_ACTION = ("Traffic is above its norm for this hour and GPUs were free: batch did not cause this. Check that "
                "{service}'s autoscaler is not pinned at its maximum (raise it if so), shed or rate-limit "
                "non-critical callers, and find where the traffic comes from.")


@dataclass(frozen=True)
class Field:
    """A value in an annotation: ``go`` writes it in the rule's template, ``fmt`` formats the
    Python value :func:`render` is given for it (the same text)."""

    name: str
    go: str
    fmt: str = "s"


def _go_string(text: str) -> str:
    """A Go template string literal (JSON's escapes are Go's; non-ASCII stays as written)."""
    return json.dumps(text, ensure_ascii=False)


def query_action(promql_format: str, label: str, fmt: str) -> str:
    """A template action: the first value of a query built with ``printf`` from one of the
    alert's labels (``%q`` quotes it as PromQL reads a string)."""
    return (f"{{{{ with printf {_go_string(promql_format)} $labels.{label} | query }}}}"
            f"{{{{ . | first | value | printf {_go_string('%' + fmt)} }}}}{{{{ end }}}}")


def time_action(offset_s: int) -> str:
    """The evaluation time plus ``offset_s`` seconds, as epoch seconds."""
    sign = "+" if offset_s >= 0 else "-"
    return f"{{{{ with query \"time() {sign} {abs(offset_s)}\" }}}}{{{{ . | first | value | printf \"%.0f\" }}}}{{{{ end }}}}"


Parts = tuple["str | Field", ...]


def parts_of(text: str, fields: Mapping[str, Field]) -> Parts:
    """``text`` with ``{name}`` references to ``fields`` cut into parts."""
    out: list[str | Field] = []
    rest = text
    while "{" in rest:
        head, _, tail = rest.partition("{")
        name, sep, rest = tail.partition("}")
        if not sep or name not in fields:
            raise ValueError(f"annotation text refers to {{{name}}}, which is no field")
        out += [head, fields[name]] if head else [fields[name]]
    if rest:
        out.append(rest)
    return tuple(out)


def go_template(parts: Parts) -> str:
    """The parts as a Prometheus annotation template (text that would open an action escaped)."""
    return "".join(x.go if isinstance(x, Field) else x.replace("{{", '{{ "{{" }}') for x in parts)


def render(parts: Parts, values: Mapping[str, Any]) -> str:
    """The parts as Prometheus would expand them, given each field's value."""
    return "".join(format(values[x.name], x.fmt) if isinstance(x, Field) else x for x in parts)


def humanize_timestamp(epoch_s: float) -> str:
    """Prometheus' ``humanizeTimestamp`` of whole seconds (Go's ``time.Time`` text, UTC).

    >>> humanize_timestamp(7140.0)
    '1970-01-01 01:59:00 +0000 UTC'
    """
    return datetime.fromtimestamp(epoch_s, timezone.utc).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")
