"""The app in Streamlit's AppTest: every page runs without an exception, and the sidebar, the
URL, the time range, uploads (good and malformed) and workload edits have their effect."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamlit.testing.v1 import AppTest  # noqa: E402

from analytics.ingest import ingest_bytes  # noqa: E402
from analytics.signals import VLLM_TTFT_BUCKETS_S  # noqa: E402
from analytics.store import Store  # noqa: E402
from analytics.text import md  # noqa: E402
from apptest_helpers import open_settings, shown, sidebar_summary, tables  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
T0_MS = 1_764_316_800_000  # 2025-11-28T08:00Z
MINUTES = 60


def scrape_text(t0_ms: int = T0_MS, minutes: int = MINUTES) -> bytes:
    """An hour of concatenated, timestamped scrapes of a 4-GPU node: two GPUs serve chat-vllm,
    two run a fine-tune; chat-vllm's p99 time-to-first-token breaks 100 ms after minute 40."""
    pods = {0: ("inference", "chat-vllm-7d9f8b6c5d-x2x4z", "inference-high"),
            1: ("inference", "chat-vllm-7d9f8b6c5d-k9m2p", "inference-high"),
            2: ("ml-training", "nightly-finetune-0", "training-low"),
            3: ("ml-training", "nightly-finetune-1", "training-low")}
    out: list[str] = []
    ttft_counts = {p: [0] * (len(VLLM_TTFT_BUCKETS_S) + 1) for p in (0, 1)}
    for m in range(minutes):
        ts = t0_ms + m * 60_000
        for g, (ns, pod, prio) in pods.items():
            lab = (f'gpu="{g}",UUID="GPU-000{g}",modelName="NVIDIA H100 80GB HBM3",'
                   f'Hostname="gpu-node-00",pod="{pod}",namespace="{ns}",container="main"')
            util = 35 + 10 * (g % 2) if ns == "inference" else 97
            out.append(f"DCGM_FI_DEV_GPU_UTIL{{{lab}}} {util} {ts}")
            out.append(f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{lab}}} {util / 100:.2f} {ts}")
            out.append(f"DCGM_FI_DEV_FB_USED{{{lab}}} {60000 + g} {ts}")
            out.append(f'kube_pod_container_resource_requests{{namespace="{ns}",pod="{pod}",'
                       f'container="main",node="gpu-node-00",resource="nvidia_com_gpu",'
                       f'unit="integer"}} 1 {ts}')
            out.append(f'kube_pod_info{{namespace="{ns}",pod="{pod}",node="gpu-node-00",'
                       f'created_by_kind="ReplicaSet",created_by_name="x",priority_class="{prio}"}} 1 {ts}')
            out.append(f'kube_pod_status_phase{{namespace="{ns}",pod="{pod}",phase="Running"}} 1 {ts}')
        out.append(f'kube_node_status_allocatable{{node="gpu-node-00",resource="nvidia_com_gpu",'
                   f'unit="integer"}} 4 {ts}')
        slow = m >= 40
        for g in (0, 1):
            ns, pod, _ = pods[g]
            # 600 requests a minute: 99% fast (40 ms), 1% at 90 ms; when slow, 5% at 400 ms.
            fast, tail = (560, 40) if slow else (594, 6)
            tail_s = 0.4 if slow else 0.09
            counts = ttft_counts[g]
            for i, le in enumerate(VLLM_TTFT_BUCKETS_S):
                counts[i] += (fast if le >= 0.04 else 0) + (tail if le >= tail_s else 0)
            counts[-1] += fast + tail
            base = f'model_name="llama",pod="{pod}",namespace="{ns}",job="vllm",instance="10.0.0.{g}:8000"'
            for le, c in zip((*VLLM_TTFT_BUCKETS_S, "+Inf"), counts):
                out.append(f'vllm:time_to_first_token_seconds_bucket{{{base},le="{le}"}} {c} {ts}')
            out.append(f"vllm:time_to_first_token_seconds_count{{{base}}} {counts[-1]} {ts}")
            out.append(f"vllm:time_to_first_token_seconds_sum{{{base}}} {counts[-1] * 0.05:.1f} {ts}")
            out.append(f'vllm:request_success_total{{{base},finished_reason="stop"}} {counts[-1]} {ts}')
        out.append(f'kube_horizontalpodautoscaler_status_desired_replicas{{horizontalpodautoscaler='
                   f'"chat-vllm",namespace="inference"}} {3 if slow else 2} {ts}')
        out.append(f'kube_horizontalpodautoscaler_status_current_replicas{{horizontalpodautoscaler='
                   f'"chat-vllm",namespace="inference"}} 2 {ts}')
        out.append(f'kube_deployment_status_replicas_ready{{deployment="chat-vllm",'
                   f'namespace="inference"}} 2 {ts}')
    return ("\n".join(out) + "\n").encode()


MALFORMED = b'# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{gpu="0" 12\n'


def build_store(path: Path) -> Path:
    with Store(path) as store:
        result = ingest_bytes(store, "node-hour.prom", scrape_text())
    assert result.status == "loaded", result
    return path


@pytest.fixture(scope="module")
def db_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("app") / "hour.duckdb")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Never touch the repository's own store or tidelens.toml.
    monkeypatch.setenv("TIDELENS_UPLOADS_DB", str(tmp_path / "uploads.duckdb"))
    monkeypatch.setenv("TIDELENS_CONFIG", str(tmp_path / "tidelens.toml"))


def _app(*, settings_open: bool = True, **params: str) -> AppTest:
    """The app opened from a link with ``params``; its sidebar settings panel opened (as a
    click on "View settings" does) unless ``settings_open`` is false."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(params)
    at.run()
    return open_settings(at) if settings_open else at


def _table_with(at: AppTest, *columns: str):
    """The first table showing all these columns (static tables have no key in AppTest): its
    values under its headers (what is drawn is their formatted text)."""
    for df in tables(at):
        if set(columns) <= set(df.value.columns):
            return df.value
    raise AssertionError(f"no table with columns {columns}")


def _no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _registered_pages() -> list[str]:
    from pages._nav import PAGES

    return [path for path, *_ in PAGES if (ROOT / path).exists()]


def test_every_page_runs(db_file: Path) -> None:
    at = _app(source="duckdb", db=str(db_file))
    _no_exception(at)
    assert at.title[0].value == "Overview"
    pages = _registered_pages()
    assert {"pages/overview.py", "pages/data.py"} <= set(pages)
    for page in pages:
        at.switch_page(page).run()
        _no_exception(at)
        assert at.title, f"{page} shows no title"


def test_overview_tells_the_story(db_file: Path) -> None:
    at = _app(source="duckdb", db=str(db_file), slo="100")
    _no_exception(at)
    # The signal report is folded to one line (counts, what is missing) and not drawn...
    line = at.expander[0].label
    assert line.startswith("Signals in this store: ") and "missing: " in line
    assert "gpu_holders" not in line.split("missing: ")[1]
    assert not at.dataframe and not tables(at)
    # ...until opened.
    at.session_state["ov_signals"] = True
    at.run()
    signals = tables(at)[-1].value
    present = dict(zip(signals["signal"], signals["found"]))
    assert present["gpu_holders"] and present["request_latency"]
    assert sorted(signals.loc[~signals["found"], "signal"]) == sorted(line.split("missing: ")[1].split(", "))
    kpis = {m.label: m.value for m in at.metric}
    assert kpis["Pool size"] == "4 GPUs"
    # chat-vllm breaks 100 ms for the last 20 minutes of the hour.
    assert 15 <= float(kpis["Minutes over the SLO, any service, observed"].replace(",", "")) <= 21
    # A stricter SLO can only add violating minutes; a looser one removes them all.
    at.number_input(key="v_slo").set_value(1000.0).run()
    assert float({m.label: m.value for m in at.metric}["Minutes over the SLO, any service, observed"]) == 0


def test_link_settings_open_the_same_view(db_file: Path) -> None:
    at = _app(source="duckdb", db=str(db_file), step="300", tz="Europe/Berlin",
              slo="250,chat-vllm:500", start="2025-11-28T08:10Z", settings_open=False)
    _no_exception(at)
    # Folded, the panel draws no widget; one line says what the view is.
    assert not at.sidebar.selectbox and not at.sidebar.slider
    assert sidebar_summary(at).endswith("Nov 28 09:10 → Nov 28 09:59 Europe/Berlin · step 5 min"
                                        " · SLO 250 ms, chat-vllm 500 ms")
    open_settings(at)
    assert at.radio(key="v_source").value == "duckdb"
    assert at.text_input(key="v_db").value == str(db_file)
    assert at.selectbox(key="v_step").value == 300
    assert at.selectbox(key="v_tz").value == "Europe/Berlin"
    assert at.number_input(key="v_slo").value == 250.0
    assert at.text_input(key="v_slo_per").value == "chat-vllm:500"
    lo, hi = at.slider(key="v_range").value
    assert (lo.hour, lo.minute) == (9, 10)  # 08:10 UTC shown in Berlin (UTC+1)
    # The URL keeps every setting for the next colleague.
    assert at.query_params["step"] == "300" and at.query_params["start"] == "2025-11-28T08:10:00Z"
    assert at.query_params["slo"] == "250,chat-vllm:500" and at.query_params["tz"] == "Europe/Berlin"


def test_bad_link_values_warn_and_fall_back(db_file: Path) -> None:
    at = _app(source="duckdb", db=str(db_file), step="soon")
    _no_exception(at)
    assert any("step='soon'" in w.value for w in at.warning)
    assert at.selectbox(key="v_step").value == 60
    assert "step" not in at.query_params


def test_source_switch_and_time_range(db_file: Path) -> None:
    at = _app(source="uploads")
    _no_exception(at)
    assert any("Upload files on the Data page" in w.value for w in at.warning)
    at.radio(key="v_source").set_value("duckdb").run()
    at.text_input(key="v_db").input(str(db_file)).run()
    _no_exception(at)
    assert at.query_params["source"] == "duckdb" and at.query_params["db"] == str(db_file)
    assert not any("Upload files" in w.value for w in at.warning)
    lo, hi = at.slider(key="v_range").value
    assert (hi - lo).total_seconds() == (MINUTES - 1) * 60  # the whole hour of data
    assert "start" not in at.query_params  # the whole span is "follow the data"
    at.slider(key="v_range").set_range(lo.replace(minute=lo.minute + 30), hi).run()
    _no_exception(at)
    assert at.query_params["start"] == "2025-11-28T08:30:00Z" and "end" not in at.query_params


def test_upload_good_and_malformed_files(tmp_path: Path) -> None:
    at = _app(source="uploads")
    at.switch_page("pages/data.py").run()
    _no_exception(at)
    at.file_uploader(key="upload_files").set_value([
        ("node-hour.prom", scrape_text(), "text/plain"),
        ("broken.prom", MALFORMED, "text/plain")]).run()
    _no_exception(at)
    results = _table_with(at, "file", "status", "message")
    status = dict(zip(results["file"], results["status"]))
    assert status == {"node-hour.prom": "loaded", "broken.prom": "failed"}
    errors = [shown(e.value) for e in at.error]
    assert any(e.startswith("broken.prom:2:") for e in errors), errors
    # The good file is in the uploads store: listed as a source, its metrics in the inventory.
    sources = _table_with(at, "name", "format", "status", "samples")
    assert list(sources.loc[sources["status"] == "loaded", "name"]) == ["node-hour.prom"]
    assert md("DCGM_FI_DEV_GPU_UTIL") in at.radio(key="inv_metric").options
    # The same file again is skipped, not loaded twice.
    at.file_uploader(key="upload_files").set_value(("again.prom", scrape_text(), "text/plain")).run()
    results = _table_with(at, "file", "status", "message")
    assert dict(zip(results["file"], results["status"]))["again.prom"] == "skipped"


def test_an_uploaded_folder_skips_docs_and_groups_failures_by_reason(tmp_path: Path) -> None:
    """A README and a LICENSE are skipped (not failed); twelve files in one unknown layout are one
    box naming them, not twelve; a file failing for its own reason keeps its own box and line."""
    at = _app(source="uploads")
    at.switch_page("pages/data.py").run()
    # pod tables in OpenB's layout (a scheduler trace, no time series): one unknown layout
    traces = [(f"openb-pods-{i}.csv", (f"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
                                       f"pod-{i},8000,30000,1,1000,V100M16,LS\n").encode(), "text/csv")
              for i in range(12)]
    at.file_uploader(key="upload_files").set_value([
        ("README.md", b"# data\n", "text/markdown"), ("LICENSE", b"MIT\n", "text/plain"),
        *traces, ("broken.prom", MALFORMED, "text/plain")]).run()
    _no_exception(at)
    results = _table_with(at, "file", "status", "message")
    status = dict(zip(results["file"], results["status"]))
    assert status["README.md"] == status["LICENSE"] == "skipped"
    assert sum(v == "failed" for v in status.values()) == 13
    errors = [shown(e.value) for e in at.error]
    assert len(errors) == 2, errors
    grouped = next(e for e in errors if e.startswith("12 files:"))
    assert "no known layout" in grouped and "openb-pods-0.csv" in grouped and "and 7 more" in grouped
    assert any(e.startswith("broken.prom:2:") for e in errors), errors


def test_workload_edit_is_saved_and_shown(db_file: Path, tmp_path: Path) -> None:
    at = _app(source="duckdb", db=str(db_file))
    at.switch_page("pages/data.py").run()
    _no_exception(at)
    shown_map = _table_with(at, "namespace", "workload", "class", "team", "rule").set_index("workload")
    assert shown_map.loc["nightly-finetune", "class"] == "batch"
    assert not at.data_editor  # the editor is drawn only once its panel is opened
    at.session_state["workload_edit"] = True
    at.run()
    table = at.data_editor(key="workload_editor").value
    row = table.index[table["workload"] == "nightly-finetune"][0]
    assert table.loc[row, "cls"] == "batch"
    at.session_state["workload_editor"] = {"edited_rows": {int(row): {"cls": "other"}},
                                           "added_rows": [], "deleted_rows": []}
    at.run()
    _no_exception(at)
    saved = (tmp_path / "tidelens.toml").read_text()
    assert 'class = "other"' in saved and "nightly" in saved
    table = at.data_editor(key="workload_editor").value
    row = table.index[table["workload"] == "nightly-finetune"][0]
    assert table.loc[row, "cls"] == "other"
    assert table.loc[row, "rule"].endswith("app: ml-training/nightly-finetune")
    shown_map = _table_with(at, "namespace", "workload", "class", "team", "rule").set_index("workload")
    assert shown_map.loc["nightly-finetune", "class"] == "other"


def test_a_file_that_is_not_a_store_is_a_message(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.duckdb"
    bogus.write_text("not a database")
    at = _app(source="duckdb", db=str(bogus))
    _no_exception(at)
    assert any("Cannot open" in w.value for w in at.warning)


def test_local_time_is_the_browser_zone(db_file: Path) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(source="duckdb", db=str(db_file))
    at.context["timezone"] = "America/New_York"
    open_settings(at.run())
    tz = at.selectbox(key="v_tz")
    assert tz.options[:2] == ["UTC", "Local (America/New_York)"]
    assert "Asia/Tokyo" in tz.options and len(tz.options) > 300  # any IANA zone
    tz.set_value("America/New_York").run()
    _no_exception(at)
    assert at.query_params["tz"] == "America/New_York"
    assert "times in America/New_York" in at.caption[0].value
    lo, _ = at.slider(key="v_range").value
    assert (lo.hour, lo.minute) == (3, 0)  # 08:00 UTC is 03:00 in New York (EST)


def test_folded_settings_keep_their_values(db_file: Path) -> None:
    at = _app(source="duckdb", db=str(db_file))
    at.selectbox(key="v_step").set_value(300).run()
    at.number_input(key="v_slo").set_value(150.0).run()
    at.session_state["v_open"] = False  # fold the panel, as a click on its header does
    at.run()
    _no_exception(at)
    assert not at.sidebar.selectbox
    assert "step 5 min · SLO 150 ms" in sidebar_summary(at)
    assert at.query_params["step"] == "300" and at.query_params["slo"] == "150"
    at.switch_page("pages/rhythm.py").run()
    _no_exception(at)
    assert "step 5 min · SLO 150 ms" in sidebar_summary(at)
    open_settings(at)
    assert at.selectbox(key="v_step").value == 300 and at.number_input(key="v_slo").value == 150.0


def test_data_page_shows_autoscaler_links_and_unlabelled_gpu_rules(tmp_path: Path) -> None:
    from analytics.ingest import ingest_path

    fixtures = Path(__file__).parent / "fixtures" / "independent"
    db = tmp_path / "links.duckdb"
    with Store(db) as store:
        for name in ("keda.prom", "ambiguous.prom", "idle_unlabelled.prom"):
            assert [r.status for r in ingest_path(store, fixtures / name)] == ["loaded"]
    at = _app(source="duckdb", db=str(db))
    at.switch_page("pages/data.py").run()
    _no_exception(at)
    links = _table_with(at, "kind", "name", "service", "rule", "status")
    hpa = links[links["kind"] == "hpa"].set_index("name")
    assert hpa.loc["keda-hpa-chat-api-vllm", "service"] == "chat-api-vllm"
    assert hpa.loc["keda-hpa-chat-api-vllm", "rule"] == "KEDA ScaledObject, same name"
    assert list(hpa.loc[["chat", "chat-api"], "status"]) == ["ambiguous", "ambiguous"]
    warnings = [w.value for w in at.warning]
    assert any("chat" in w and "ambiguous" in w and "tidelens.toml" in w for w in warnings), warnings
    rules = _table_with(at, "job", "gpus", "kubernetes_mode")
    assert bool(rules.set_index("job").loc["gpu-metrics", "kubernetes_mode"])
    # Each job's rule, a sentence, is listed under the table (a list wraps on a projector).
    assert any("- **gpu-metrics**: " in shown(m.value) for m in at.markdown), [m.value for m in at.markdown]


def test_overview_tells_unrecognised_metrics_from_an_empty_range(tmp_path: Path, fixtures: Path,
                                                                  monkeypatch) -> None:
    """A store of metrics no timeline reads says so, naming them; it never blames the range."""
    from analytics.ingest import ingest_path

    db = tmp_path / "up.duckdb"
    with Store(db) as st:
        ingest_path(st, fixtures / "prom_query_range_up_201907281200.json")
    monkeypatch.setenv("TIDELENS_TIME_WINDOW", "2000-01-01,now+1d")
    at = _app(source="duckdb", db=str(db))
    _no_exception(at)
    said = " ".join(shown(i.value) for i in at.info)
    assert "None of this store's 1 metrics (up)" in said and "not recognised" in said, said
    assert "widen" not in said.lower()


def test_any_iana_zone_can_be_picked_and_stays_in_the_link(db_file: Path) -> None:
    at = _app(source="duckdb", db=str(db_file))
    at.selectbox(key="v_tz").set_value("Asia/Tokyo").run()
    _no_exception(at)
    assert at.query_params["tz"] == "Asia/Tokyo"
    lo, _ = at.slider(key="v_range").value
    assert (lo.hour, lo.minute) == (17, 0)  # 08:00 UTC is 17:00 in Tokyo
