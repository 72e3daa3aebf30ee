"""Tail events and the pool story where the room already looks: Grafana.

- :func:`event_annotations`: each tail event as an annotation of Grafana's HTTP API (``time``,
  ``timeEnd``, tags ``tidelens``, ``tidelens-event:<id>``, ``service:<name>``, ``cause:<cause>``
  and ``misattributed`` or ``attributed``; the text: shares and the one-line finding);
- :func:`dashboard_model`: a dashboard drawing the pool story from the user's own Prometheus with
  the PromQL ``tidelens pull`` uses (GPUs held by the classes this store's workload map gave each
  namespace, p99 against each service's SLO, desired vs ready replicas, batch holders), only for
  the signals the store has, plus an annotation query for the Tidelens tags; built with
  ``grafana-foundation-sdk`` and its types;
- :func:`post_annotations`: posts them, idempotently (an event already there, found by its
  ``tidelens-event:<id>`` tag, is updated, never duplicated), with the outbound-request rules of
  the live pulls: no redirect followed, the token sent to the given origin only, never logged or
  stored, and redacted from any error.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any, Iterable

from analytics.errors import ConfigError, TidelensError

if TYPE_CHECKING:
    from analytics.events import EventsAnalysis
    from analytics.store import Store

TAG = "tidelens"
STEP_MS = 60_000  # the pull's step: one-minute windows
DATASOURCE_VAR = "datasource"


class GrafanaError(TidelensError):
    """Grafana refused or could not be reached; the message names the request, never the token."""


def event_tag(event_id: str) -> str:
    return f"tidelens-event:{event_id}"


def event_annotations(analysis: "EventsAnalysis", *, dashboard_uid: str | None = None) -> list[dict[str, Any]]:
    """One annotation per tail event, in the annotations API's JSON (``POST /api/annotations``).

    Times are the event's own (UTC epoch ms), the same as ``tidelens events --json``.
    """
    from analytics.events.report import dashboard_vs_found

    out = []
    for ev in analysis.events:
        said, happened = dashboard_vs_found(ev)
        shares = ", ".join(f"{k.replace('_', ' ')} {v:.0%}" for k, v in ev.shares.items() if v)
        item: dict[str, Any] = {
            "time": int(ev.start_ms), "timeEnd": int(ev.end_ms),
            "tags": [TAG, event_tag(ev.id), f"service:{ev.service}", f"cause:{ev.cause}",
                     "misattributed" if ev.misattributed else "attributed"],
            "text": (f"{ev.service}: {ev.cause_words} for {ev.duration_min:.0f} min, peak p99 "
                     f"{ev.peak_p99_ms:,.0f} ms (SLO {ev.slo_ms:g} ms). {happened} Shares: {shares or 'n/a'}."
                     + (f" A dashboard would have said: {said}" if ev.misattributed else "")),
        }
        if dashboard_uid:
            item["dashboardUID"] = dashboard_uid
        out.append(item)
    return out


# -- the dashboard ------------------------------------------------------------------------------
def _regex(values: Iterable[str]) -> str:
    return "|".join(re.escape(v) for v in sorted(set(values)))


def pool_story_queries(store: "Store", wmap: Any = None,
                       slos_ms: dict[str, float] | None = None) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """``(panel title, unit, [(PromQL, legend)])`` for each panel the store's signals support."""
    from analytics import signals as sg
    from analytics.live.queries import Scope, fleet_queries, step_increase, with_workload
    from analytics.workloads import classify_workloads

    metrics = set(store.metrics()["metric"].to_list())
    panels: list[tuple[str, str, list[tuple[str, str]]]] = []

    def holders(scope: Scope | None = None) -> str:
        return next(q.promql for q in fleet_queries(STEP_MS, scope) if q.key == "gpu_holders")

    devices = [m for m in (sg.DCGM_GR_ENGINE_ACTIVE, sg.DCGM_GPU_UTIL, sg.DCGM_FB_USED) if m in metrics]
    if devices:
        work = classify_workloads(store, wmap)
        ns_col = "namespace" if "namespace" in work.columns else None
        targets = [(f"count(count by (UUID) (last_over_time({devices[0]}[1m])))", "GPUs in the pool")]
        by_cls: dict[str, set[str]] = {}
        if ns_col:
            for cls, ns in work.select("cls", ns_col).drop_nulls().iter_rows():
                by_cls.setdefault(cls, set()).add(ns)
        for cls in ("inference", "batch", "other"):
            if by_cls.get(cls):
                scope = Scope(matchers=(("namespace~", _regex(by_cls[cls])),))
                targets.append((f"sum({holders(scope)})", f"held by {cls}"))
        panels.append(("GPUs held by class (namespaces as this store's workload map classed them)",
                       "none", targets))
        if by_cls.get("batch"):
            scope = Scope(matchers=(("namespace~", _regex(by_cls["batch"])),))
            panels.append(("Batch holders", "none",
                           [(f"sum by (namespace, pod) ({holders(scope)})", "{{namespace}}/{{pod}}")]))
    for hist in (sg.VLLM_TTFT, sg.VLLM_E2E, sg.HTTP_DURATION):
        if hist + "_bucket" not in metrics:
            continue
        inc = with_workload(step_increase(f"{hist}_bucket", STEP_MS))
        targets = [(f"histogram_quantile(0.99, sum by (workload, le) ({inc}))", "{{workload}} p99")]
        for svc, slo in sorted((slos_ms or {}).items()):
            if svc != "*":
                targets.append((f"vector({slo / 1000.0:g})", f"SLO {svc}"))
        panels.append((f"p99 against the SLO ({hist})", "s", targets))
    replicas = []
    if sg.KSM_HPA_DESIRED in metrics:
        replicas.append((f"max by (horizontalpodautoscaler) ({sg.KSM_HPA_DESIRED})",
                         "desired {{horizontalpodautoscaler}}"))
    for ready in ("kube_deployment_status_replicas_ready", "kube_horizontalpodautoscaler_status_current_replicas"):
        if ready in metrics:
            label = "deployment" if "deployment" in ready else "horizontalpodautoscaler"
            replicas.append((f"max by ({label}) ({ready})", f"ready {{{{{label}}}}}"))
    if replicas:
        panels.append(("Desired vs ready replicas", "none", replicas))
    return panels


def dashboard_model(store: "Store", *, wmap: Any = None, slos_ms: dict[str, float] | None = None,
                    title: str = "Tidelens: the pool story", uid: str = "tidelens-pool-story") -> dict[str, Any]:
    """The dashboard's JSON model (Grafana's ``dashboard`` object), built with the SDK's types."""
    from grafana_foundation_sdk.builders import common as cb
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.builders import prometheus, timeseries
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import common as cm
    from grafana_foundation_sdk.models import dashboard as dm

    ds = dm.DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VAR}}}")
    board = (db.Dashboard(title).uid(uid).tags([TAG]).time("now-7d", "now").refresh("5m").timezone("utc")
             .with_variable(db.DatasourceVariable(DATASOURCE_VAR).label("Prometheus").type("prometheus"))
             .annotation(db.AnnotationQuery().name("Tidelens tail events").enable(True).icon_color("red")
                         .datasource(dm.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
                         .target(db.AnnotationTarget().type("tags").tags([TAG]).match_any(False).limit(500))))
    for i, (name, unit, targets) in enumerate(pool_story_queries(store, wmap, slos_ms)):
        # A timeseries panel's options are an object with a legend and a tooltip (the SDK's schema
        # requires both); without them the builder writes "options": null, which Grafana's schema refuses.
        panel = (timeseries.Panel().title(name).unit(unit).datasource(ds).height(9).span(24 if i == 0 else 12)
                 .legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST)
                         .placement(cm.LegendPlacement.BOTTOM).show_legend(True).calcs([]))
                 .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING)))
        for k, (expr, legend) in enumerate(targets):
            panel = panel.with_target(prometheus.Dataquery().expr(expr).legend_format(legend)
                                      .ref_id(chr(ord("A") + k)).datasource(ds).range())
        board = board.with_panel(panel)
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def dashboard_exprs(model: dict[str, Any]) -> list[str]:
    """Every PromQL expression of a dashboard model (its panels' targets)."""
    return [t["expr"] for p in model.get("panels", []) for t in p.get("targets", []) if t.get("expr")]


# -- posting --------------------------------------------------------------------------------------
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001
        raise GrafanaError(f"{req.get_method()} {req.full_url}: Grafana answered {code} with a redirect to "
                           f"{newurl}; not followed (the token goes to the given URL only): give that "
                           "URL instead")


def _redact(text: str, token: str) -> str:
    return text.replace(token, "[redacted]") if token else text


def _call(base: str, token: str, method: str, path: str, body: Any = None, *, timeout_s: float) -> Any:
    url = base.rstrip("/") + path
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json"})
    opener = urllib.request.build_opener(_NoRedirect())
    try:
        with opener.open(req, timeout=timeout_s) as r:
            raw = r.read(8 << 20)
    except urllib.error.HTTPError as exc:
        said = _redact(exc.read(2048).decode("utf-8", "replace"), token)
        raise GrafanaError(f"{method} {url}: Grafana answered {exc.code}: {said[:300]}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise GrafanaError(f"{method} {url}: {_redact(str(exc), token)}; is Grafana reachable there?") from None
    return json.loads(raw) if raw else None


def post_annotations(url: str, token: str, annotations: list[dict[str, Any]], *,
                     timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """Create or update each annotation (found again by its event tag); returns what was done."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"--url {url!r}: give Grafana's base URL, e.g. https://grafana.example.com")
    if not token:
        raise ConfigError("no Grafana token: set TIDELENS_GRAFANA_TOKEN or pass --token-file FILE")
    done = []
    for item in annotations:
        tag = next(t for t in item["tags"] if t.startswith("tidelens-event:"))
        found = _call(url, token, "GET", "/api/annotations?" + urllib.parse.urlencode(
            {"tags": tag, "limit": 10, "type": "annotation"}), timeout_s=timeout_s) or []
        if found:
            ann_id = found[0]["id"]
            _call(url, token, "PUT", f"/api/annotations/{int(ann_id)}", item, timeout_s=timeout_s)
            done.append({"event": tag.split(":", 1)[1], "action": "updated", "id": ann_id})
        else:
            got = _call(url, token, "POST", "/api/annotations", item, timeout_s=timeout_s) or {}
            done.append({"event": tag.split(":", 1)[1], "action": "created", "id": got.get("id")})
    return done
