"""Live pulls against a real, backfilled Prometheus: aggregated and raw paths equal the file data."""

from __future__ import annotations

import live_data as d
import orjson
import pytest
from plugins.prometheus import prometheus  # noqa: F401  (the session fixture)

from analytics import promql as lq
from analytics import signals as s
from analytics.live.client import ClientConfig, PromClient, PullError, SeriesGuardError
from analytics.live.pull import pull, pull_raw
from analytics.promql import PullQuery, Scope, fleet_queries
from analytics.sql import live as live_sql
from analytics.store import Store


def pulled_samples(store: Store, metric: str):
    """``(metric, labels, ts_ms, value)`` of one stored metric: what a pull landed."""
    return store.query(live_sql.SAMPLES_WITH_LABELS, {"metric": metric, "start_ms": 0, "end_ms": 2**62})


pytestmark = [pytest.mark.prometheus, pytest.mark.xdist_group("prometheus")]


def _client(url: str, **cfg) -> PromClient:
    return PromClient(url, config=ClientConfig(**cfg), sleep=lambda _s: None)


def _by_labels(frame, keep: tuple[str, ...]) -> dict[tuple, dict[int, float]]:
    out: dict[tuple, dict[int, float]] = {}
    for labels, ts, v in frame.select("labels", "ts_ms", "value").iter_rows():
        lab = orjson.loads(labels)
        key = tuple((k, lab[k]) for k in keep if lab.get(k))
        out.setdefault(key, {})[ts] = v
    return out


def test_raw_pull_equals_the_file_samples(prometheus, store):
    url, samples = prometheus
    with _client(url) as client:
        report = pull_raw(store, client, '{__name__=~"DCGM_FI_.*"}', d.T0_MS - 1, d.END_MS,
                          window_ms=1_800_000)
    assert report.samples > 0
    expected = {}
    for metric, labels, ts, v in samples:
        if metric.startswith("DCGM_FI_"):
            expected[(metric, orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode(), ts)] = v
    got = {}
    for metric in (s.DCGM_FB_USED, s.DCGM_GPU_UTIL, s.DCGM_GR_ENGINE_ACTIVE):
        for _m, labels, ts, v in pulled_samples(store, metric).iter_rows():
            got[(metric, labels, ts)] = v
    assert got == expected


def test_aggregated_gpu_holders_equal_the_reference(prometheus, store):
    url, samples = prometheus
    with _client(url) as client:
        report = pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS,
                      queries=[q for q in fleet_queries(d.STEP_MS) if q.key == "gpu_holders"])
    assert report.samples > 0
    got = _by_labels(pulled_samples(store, lq.GPU_HOLDERS), d.HOLDER)
    for t in d.step_ends():
        want = d.expected_holders(samples, t)
        have = {k: v[t] for k, v in got.items() if t in v}
        assert have == pytest.approx(want), t
    # A time-sliced GPU counts once: the two notebooks hold half a GPU each.
    nb = [k for k in got if ("pod", "dev-notebook-1") in k][0]
    assert got[nb][d.T0_MS] == pytest.approx(0.5)


def test_aggregated_histogram_increase_equals_the_reference(prometheus, store):
    url, samples = prometheus
    metric = s.VLLM_TTFT + "_bucket"
    with _client(url) as client:
        pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS,
             queries=[q for q in fleet_queries(d.STEP_MS) if q.key == f"inc:{metric}"])
    frame = pulled_samples(store, lq.increase_name(metric))
    got: dict[tuple, dict[int, float]] = {}
    for labels, ts, v in frame.select("labels", "ts_ms", "value").iter_rows():
        lab = orjson.loads(labels)
        assert "pod" not in lab  # summed over pods, by service
        got.setdefault((lab["workload"], lab["le"]), {})[ts] = v
    for t in d.step_ends():
        want = d.expected_bucket_increase(samples, t)
        have = {k: v[t] for k, v in got.items() if t in v}
        assert have == pytest.approx(want), t


def test_fleet_catalogue_runs_and_lands_every_signal(prometheus, store):
    url, _ = prometheus
    progress: list[tuple[int, int, str]] = []
    with _client(url) as client:
        report = pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS,
                      queries=fleet_queries(d.STEP_MS), progress=lambda *a: progress.append(a))
    metrics = set(store.metrics()["metric"].to_list())
    for name in (lq.GPU_HOLDERS, lq.GPU_UTIL_SUM, lq.FB_USED_SUM, lq.GPU_ACTIVE_SUM,
                 lq.increase_name(s.VLLM_SUCCESS), lq.sum_name(s.VLLM_RUNNING), s.KSM_HPA_DESIRED):
        assert name in metrics, name
    assert progress[-1][0] == progress[-1][1] == len(progress)
    # Names carry no credentials and say where each chunk came from.
    assert all(r.name.startswith("prom://127.0.0.1:") for r in report.results)
    # Time-sliced GPU-b: the share-weighted util sum is the device's 40 %, not 80 %.
    util = _by_labels(pulled_samples(store, lq.GPU_UTIL_SUM), ("pod",))
    assert util[(("pod", "dev-notebook-1"),)][d.T0_MS] == pytest.approx(20.0)


def test_long_ranges_split_and_repulls_fetch_only_what_is_new(prometheus, store):
    url, samples = prometheus
    qs = [q for q in fleet_queries(d.STEP_MS) if q.key == "gpu_holders"]
    half = d.T0_MS + 59 * d.STEP_MS
    with _client(url, max_points=25) as client:
        first = pull(store, client, d.T0_MS, half, step_ms=d.STEP_MS, queries=qs)
        second = pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=qs)
        third = pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=qs)
    # 60 steps in aligned chunks of at most 25 points: three or four requests.
    assert len(first.results) in (3, 4)
    assert all((r.last_ts_ms - r.first_ts_ms) // d.STEP_MS + 1 <= 25 for r in first.results)
    assert {r.first_ts_ms for r in second.results} >= {half + d.STEP_MS}
    assert min(r.first_ts_ms for r in second.results) > half
    assert third.requests == 0 and third.up_to_date == ["gpu_holders"]
    got = _by_labels(pulled_samples(store, lq.GPU_HOLDERS), d.HOLDER)
    t = d.END_MS
    assert {k: v[t] for k, v in got.items() if t in v} == pytest.approx(d.expected_holders(samples, t))


def test_many_series_ask_for_shorter_ranges(prometheus, store):
    url, samples = prometheus
    qs = [q for q in fleet_queries(d.STEP_MS) if q.key == "gpu_holders"]
    with _client(url) as client:
        whole = pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=qs,
                     incremental=False)
    assert len(whole.results) == 1  # under the default budget: one request for the range
    steps = (d.END_MS - d.T0_MS) // d.STEP_MS + 1
    with Store(":memory:") as small, _client(url, max_samples=1) as client:
        split = pull(small, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=qs)
        # A budget smaller than the series count asks for one step at a time, same samples.
        assert split.requests == steps + 1  # the guard, then one request per step
        assert all(r.first_ts_ms == r.last_ts_ms for r in split.results)
        got = _by_labels(pulled_samples(small, lq.GPU_HOLDERS), d.HOLDER)
    want = _by_labels(pulled_samples(store, lq.GPU_HOLDERS), d.HOLDER)
    assert got == want


def test_same_chunks_again_change_nothing(prometheus, store):
    url, _ = prometheus
    qs = [q for q in fleet_queries(d.STEP_MS) if q.key == "gpu_holders"]
    with _client(url) as client:
        pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=qs)
        before = store.totals()
        again = pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=qs,
                     incremental=False)
    assert again.results and all(r.status == "skipped" for r in again.results)
    assert store.totals() == before


def test_scope_narrows_every_query(prometheus, store):
    url, _ = prometheus
    scope = Scope.parse("namespace=dev")
    with _client(url) as client:
        pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, scope=scope,
             queries=[q for q in fleet_queries(d.STEP_MS, scope) if q.key == "gpu_holders"])
    pods = {orjson.loads(lab).get("pod") for lab in pulled_samples(store, lq.GPU_HOLDERS)["labels"]}
    assert pods == {"dev-notebook-1", "dev-notebook-2"}


def test_series_guard_stops_runaway_queries(prometheus, store):
    url, _ = prometheus
    with _client(url) as client, pytest.raises(SeriesGuardError, match="--scope"):
        pull_raw(store, client, '{__name__=~".+"}', d.T0_MS, d.END_MS, max_series=5)
    assert store.totals()["samples"] == 0


def test_query_error_shows_the_servers_message(prometheus, store):
    url, _ = prometheus
    bad = PullQuery("bad", "tidelens:bad", "sum(rate(x[5m])", "gpu_holders")
    with _client(url) as client, pytest.raises(PullError, match="bad_data.*parse error"):
        pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=[bad])


def test_server_down_is_a_clear_error(store):
    import prom_server
    port = prom_server.free_port()  # nothing listens there
    with _client(f"http://127.0.0.1:{port}", retries=1) as client, \
            pytest.raises(PullError, match="cannot connect .* is the server running"):
        pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS)


def test_cli_pull_prints_progress_and_a_summary_and_refuses_unlisted_servers(prometheus, tmp_path,
                                                                            capsys, monkeypatch):
    from analytics.cli import main
    from analytics.times import iso_utc as iso

    url, _ = prometheus
    db = str(tmp_path / "t.duckdb")
    argv = ["pull", "--url", url, "--from", iso(d.T0_MS), "--to", iso(d.END_MS), "--step", "1m",
            "--db", db, "--json"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "[1/" in out.err and "DCGM_FI_DEV_GPU_UTIL" in out.err
    report = orjson.loads(out.out)
    assert report["loaded"] > 0 and report["samples"] > 0
    assert main(argv) == 0  # again: nothing new
    again = orjson.loads(capsys.readouterr().out)
    assert again["requests"] == 0 and again["loaded"] == 0

    assert main(["pull", "--url", url, "--show-queries", "--catalogue", "fleet"]) == 0
    assert "# tidelens:gpu_holders" in capsys.readouterr().out

    cfg = tmp_path / "tidelens.toml"
    cfg.write_text('[live]\nservers = ["http://prom.internal:9090"]\n')
    assert main([*argv, "--config", str(cfg)]) == 2
    assert "not in [live] servers" in capsys.readouterr().err


def test_recent_steps_are_fetched_again_until_settled(prometheus, store):
    url, _ = prometheus
    qs = [q for q in fleet_queries(d.STEP_MS) if q.key == "gpu_holders"]
    with _client(url) as client:
        # "now" is just after the data ends: the last 5 minutes are not settled yet.
        first = pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=qs,
                     now_ms=d.END_MS + 60_000)
        before = store.totals()
        again = pull(store, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=qs,
                     now_ms=d.END_MS + 60_000)
    assert first.results and again.requests == 2  # the guard and one short chunk
    assert min(r.first_ts_ms for r in again.results) == d.END_MS - 3 * d.STEP_MS
    # the same data again: values replaced by equal ones, nothing added or changed
    after = store.totals()
    assert (after["series"], after["samples"]) == (before["series"], before["samples"])
    assert sum(r.duplicates for r in again.results) == 0


def test_nan_and_inf_from_the_server_are_noted(prometheus, store):
    """Issue 50, 7: NaN/Inf a server answers (a recording rule's 0/0, a recorded series) were stored
    without a note; the rules' recorded series land through this same pull."""
    url, _ = prometheus
    odd = PullQuery("odd", "tidelens:odd", f"sum({s.DCGM_GPU_UTIL}) / 0 - sum({s.DCGM_GPU_UTIL}) / 0",
                    "gpu_holders")  # Inf - Inf: NaN at every step
    with _client(url) as client:
        report = pull(store, client, d.T0_MS, d.T0_MS + 10 * d.STEP_MS, step_ms=d.STEP_MS, queries=[odd])
    [res] = report.results
    assert res.samples == 11 and "11 NaN/Inf value(s) stored as the source gave them, first at " \
                                  "data.result[0].values[0]" in res.note, res
    [note] = store.sources()["note"].to_list()
    assert "NaN/Inf" in note
