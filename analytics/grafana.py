"""Tail events and the pool story where the room already looks: Grafana.

- :func:`event_annotations`: each tail event as an annotation of Grafana's HTTP API (``time``,
  ``timeEnd``, tags ``tidelens``, ``tidelens-event:<id>``, ``service:<name>``, ``cause:<cause>``
  and ``misattributed`` or ``attributed``; the text: shares and the one-line finding);
- :func:`forecast_annotations`: each collision window the forecast expects ahead, as an annotation
  in the future (tags ``tidelens``, ``tidelens-forecast``, ``tidelens-event:forecast-<service>-<day>``,
  ``service:<name>``; the text: the chance, the minutes, the runs and the change tonight that avoids
  it); posted again as the night goes on, the same window is updated, never duplicated;
- :func:`dashboard_model`: a dashboard drawing the pool story from the user's own Prometheus with
  the PromQL ``tidelens pull`` uses (GPUs held by the classes this store's workload map gave each
  namespace, p99 against each service's SLO, desired vs ready replicas, batch holders, the pages
  of ``tidelens export alerts`` firing), only for the signals the store has, plus an annotation
  query for the Tidelens tags; built with
  ``grafana-foundation-sdk`` and its types;
- :func:`post_annotations`: posts them, idempotently (an event already there, found by its
  ``tidelens-event:<id>`` tag, is updated, never duplicated), through the live pulls' own
  outbound helper (:mod:`analytics.outbound`): a deadline per attempt, redirects within Grafana's
  origin only, the token sent there only, never logged or stored, and redacted (in all its
  encodings) from any message; an answer of the wrong shape is a message, not a traceback. Grafana's
  answer itself is never quoted: every request carries the token, and a server that echoes it can
  encode it in more ways than any redactor knows (spaced out, split, in an encoding of its own), so a
  message says the status, the size and the kind of the answer, never its text or its values.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from analytics import signals as sg
from analytics.errors import ConfigError, TidelensError
from analytics.events.wording import dashboard_vs_found
from analytics.outbound import Hints, HttpConfig, Outbound, check_url
from analytics.promql import Scope, fleet_queries, step_increase, with_workload
from analytics.rules.alerts import ALERTS
from analytics.secrets import Redactor, check_secret, printable
from analytics.workloads import classify_workloads

if TYPE_CHECKING:
    from analytics.events import EventsAnalysis
    from analytics.forecast.horizon import Forecast
    from analytics.store import Store

TAG = "tidelens"
STEP_MS = 60_000  # the pull's step: one-minute windows
DATASOURCE_VAR = "datasource"
# The alerts `tidelens export alerts` writes: the pages firing per alert and service (a blocked
# service has one per batch workload holding its pool), 0 while none fires.
ALERTS_FIRING = (f'count by (alertname, service) (ALERTS{{alertname=~"{"|".join(ALERTS)}", alertstate="firing"}}) '
                 'or on () label_replace(vector(0), "alertname", "none firing", "", "")')


class GrafanaError(TidelensError):
    """Grafana refused or could not be reached; the message names the request, never the token."""


def event_tag(event_id: str) -> str:
    return f"tidelens-event:{event_id}"


def event_annotations(analysis: "EventsAnalysis", *, dashboard_uid: str | None = None) -> list[dict[str, Any]]:
    """One annotation per tail event, in the annotations API's JSON (``POST /api/annotations``).

    Times are the event's own (UTC epoch ms), the same as ``tidelens events --json``.
    """

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


def forecast_annotations(fc: "Forecast", *, dashboard_uid: str | None = None) -> list[dict[str, Any]]:
    """One annotation per collision window the forecast expects (``time``/``timeEnd``: the window's
    median start and end, in the future), tagged so that the next forecast of the same service and
    day updates it (:func:`post_annotations` finds it by its ``tidelens-event:`` tag)."""
    out = []
    for w in fc.windows():
        act = next((a for a in fc.actions if a.day == w.day and a.recommended), None)
        rng = (f" ({w.minutes_range[0]:,.0f}-{w.minutes_range[1]:,.0f})" if w.minutes_range else "")
        item: dict[str, Any] = {
            "time": int(w.start_ms), "timeEnd": int(w.end_ms),
            "tags": [TAG, "tidelens-forecast", event_tag(f"forecast-{w.service}-{w.day.replace('-', '')}"),
                     f"service:{w.service}"],
            "text": (f"Forecast: {w.service} collides with batch ({', '.join(w.runs) or 'batch'}) with a "
                     f"{w.probability:.0%} chance; {w.minutes_expected:,.0f} minutes over the SLO that day{rng}."
                     + (f" Tonight: {act.text}." if act else "")),
        }
        if dashboard_uid:
            item["dashboardUID"] = dashboard_uid
        out.append(item)
    return out


# -- the dashboard ------------------------------------------------------------------------------
def _regex(values: Iterable[str]) -> str:
    return "|".join(re.escape(v) for v in sorted(set(values)))


def pool_story_queries(store: "Store", wmap: Any = None,
                       slos_ms: Mapping[str, float | None] | None = None) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """``(panel title, unit, [(PromQL, legend)])`` for each panel the store's signals support;
    ``slos_ms`` the SLO each service's events were judged by (``EventsAnalysis.slos_ms``), a line each."""

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
            if slo is not None:  # a service judged by the relative rule has no SLO line
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
    if any(f"{h}_bucket" in metrics for h in (sg.VLLM_TTFT, sg.VLLM_E2E, sg.HTTP_DURATION)):
        panels.append(("Tidelens alerts firing: batch-blocked vs traffic surge (tidelens export alerts)", "none",
                       [(ALERTS_FIRING, "{{alertname}} {{service}}")]))
    return panels


def dashboard_model(store: "Store", *, wmap: Any = None, slos_ms: Mapping[str, float | None] | None = None,
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


# -- posting --------------------------------------------------------------------------------------
# Grafana's own rule for a uid (util.IsValidShortUID): letters, digits, '-' and '_', at most 40.
_UID = re.compile(r"[A-Za-z0-9_-]{1,40}")
_MAX_ID = 2**63 - 1
GRAFANA_CONFIG = HttpConfig(timeout_s=10.0, retries=2, max_bytes=8 << 20)
_HINTS = Hints(
    timeout="is Grafana reachable there? Raise --timeout if it is slow",
    connect="is Grafana reachable there?",
    tls="check Grafana's certificate",
    redirect="If you trust that server, give its URL as --url")


def check_uid(uid: str, where: str = "--dashboard-uid") -> str:
    """``uid`` if it is a valid Grafana uid; a :class:`ConfigError` naming ``where`` if not."""
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        raise ConfigError(f"{where} {printable(str(uid))[:80]!r}: a Grafana uid is 1-40 letters, "
                          "digits, '-' or '_'")
    return uid


def _call(http: Outbound, token: str, redactor: Redactor, method: str, path: str,
          body: Any = None) -> Any:
    url = http.base + path
    what = f"{method} {path.split('?', 1)[0]}"
    reply = http.request(method, url, what=what, redactor=redactor,
                         body=None if body is None else json.dumps(body).encode(),
                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                  "Accept": "application/json"})
    if reply.status in (401, 403):
        raise http.fail(f"{http.base}: {what}: Grafana answered HTTP {reply.status} (not authorised): "
                        "check the token and that its service account may write annotations", redactor)
    if reply.status >= 300:
        raise http.fail(f"{http.base}: {what}: Grafana answered HTTP {reply.status} ({_described(reply.content)}; "
                        f"{UNQUOTED}): Grafana's own log says why", redactor)
    if not reply.content.strip():
        return None
    try:
        return json.loads(reply.content)
    except (ValueError, RecursionError):
        raise http.fail(f"{http.base}: {what}: HTTP {reply.status}, but not JSON ({_described(reply.content)}; "
                        f"{UNQUOTED}): is --url Grafana's base URL?", redactor) from None


# Why a message describes Grafana's answer instead of quoting it (see the module docstring).
UNQUOTED = "not shown: an answer to a request carrying the token is never quoted"


def _described(content: bytes) -> str:
    """What an answer is, in words that hold none of its text: its size and kind.

    >>> _described(b"<html><body>Welcome</body></html>"), _described(b'{"message": "x"}'), _described(b"")
    ('an HTML page of 33 bytes', 'JSON of 16 bytes', 'an empty body')
    """
    head = content.lstrip()[:1]
    if not head:
        return "an empty body"
    kind = "an HTML page" if head == b"<" else "JSON" if head in (b"{", b"[") else "text"
    return f"{kind} of {len(content):,} bytes"


def _annotation_id(http: Outbound, redactor: Redactor, value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_ID:
        what = ("a number out of range" if isinstance(value, (int, float)) and not isinstance(value, bool)
                else "missing" if value is None else f"a JSON {_JSON_KINDS.get(type(value), 'value')}")
        raise http.fail(f"{http.base}: {where} is {what} ({UNQUOTED}), not an annotation id: is --url "
                        "Grafana's base URL?", redactor)
    return value


_JSON_KINDS = {str: "string", bool: "boolean", list: "list", dict: "object"}


def post_annotations(url: str, token: str, annotations: list[dict[str, Any]], *,
                     config: HttpConfig | None = None,
                     sleep: Callable[[float], None] = time.sleep) -> list[dict[str, Any]]:
    """Create or update each annotation (found again by its event tag); returns what was done.

    Requests follow :mod:`analytics.outbound`'s rules (a deadline per attempt, retries of GET
    and PUT only, redirects within Grafana's origin only) and every message is redacted of the
    token in all its encodings.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"--url {printable(url)[:200]!r}: give Grafana's base URL, e.g. "
                          "https://grafana.example.com")
    base = check_url(url)
    if not token:
        raise ConfigError("no Grafana token: set TIDELENS_GRAFANA_TOKEN or pass --token-file FILE")
    redactor = Redactor([token])
    token = check_secret(token, "the Grafana token")
    for item in annotations:
        if item.get("dashboardUID") is not None:
            check_uid(item["dashboardUID"], "the annotations' dashboardUID")
    done = []
    with Outbound(base, config or GRAFANA_CONFIG, error=GrafanaError, sleep=sleep, hints=_HINTS) as http:
        for item in annotations:
            tag = next(t for t in item["tags"] if t.startswith("tidelens-event:"))
            found = _call(http, token, redactor, "GET", "/api/annotations?" + urllib.parse.urlencode(
                {"tags": tag, "limit": 10, "type": "annotation"}))
            if found is None:
                found = []
            if not isinstance(found, list) or not all(isinstance(a, dict) for a in found):
                raise http.fail(f"{base}: GET /api/annotations answered "
                                f"{'an object' if isinstance(found, dict) else type(found).__name__} "
                                "where a list of annotations was expected: is --url Grafana's base URL?",
                                redactor)
            if found:
                ann_id = _annotation_id(http, redactor, found[0].get("id"), "GET /api/annotations: [0].id")
                _call(http, token, redactor, "PUT", f"/api/annotations/{urllib.parse.quote(str(ann_id), safe='')}",
                      item)
                done.append({"event": tag.split(":", 1)[1], "action": "updated", "id": ann_id})
            else:
                got = _call(http, token, redactor, "POST", "/api/annotations", item)
                if got is None:
                    got = {}
                if not isinstance(got, dict):
                    raise http.fail(f"{base}: POST /api/annotations answered {type(got).__name__} where "
                                    "an object was expected: is --url Grafana's base URL?", redactor)
                new_id = got.get("id")
                if new_id is not None:
                    new_id = _annotation_id(http, redactor, new_id, "POST /api/annotations: id")
                done.append({"event": tag.split(":", 1)[1], "action": "created", "id": new_id})
    return done
