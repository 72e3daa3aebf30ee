"""The notebooks (issue 54): three stories in ``notebooks/``, run by papermill on a store given only
its path, telling the numbers the app and the CLI tell, shown as tables and charts (not dicts),
hostile labels as text, committed without outputs, and opened in a real JupyterLab in Chromium.

The store is the suite's :func:`apptest_helpers.morning_store` (the bundled sample's story over
three weekdays); the bundled sample itself (21 days) is what ``make notebook`` opens, too slow
for the suite. A second store, the hostile-labels one, is the postmortem's "your own store".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
import numpy
import pytest

from apptest_helpers import isolated_cli, open_store_link, shown
from test_browser import CHROMIUM, CHROMIUM_ARGS, _need_browser, free_port
from test_hostile_labels import RTL, SERVICE, hostile_scrapes

from analytics.cli import main
from analytics.errors import ConfigError, NotEnoughDataError
from analytics.events.wording import events_headline
from analytics.ingest import ingest_bytes
from analytics.notebook import Lens, open_store
from analytics.store import Store
from analytics.text import html_text
from analytics.times import parse_time_ms
from analytics.whatif.answer import answer_for, answer_store
from analytics.whatif.form import apply as apply_edits
from analytics.whatif.transforms import Transforms, apply_transforms

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
NAMES = ("postmortem", "capacity-review", "whatif")
PARAMETERS = {"postmortem": {"db", "start", "end", "service", "slo_ms", "event", "tz"},
              "capacity-review": {"db", "start", "end", "service", "slo_ms", "tz"},
              "whatif": {"db", "start", "end", "service", "slo_ms", "days"}}
JUPYTER_TOKEN = "notebook-browser-test-token-0123456789"

pytestmark = [pytest.mark.slow]


# A cell that runs past this fails the test rather than hanging the suite (a headless run waits
# forever on a reply that never comes: jupyter/nbclient#312, what an Output widget captured with
# `with out:` did here in two module runs of three; notebooks/whatif.ipynb sets its outputs instead).
CELL_TIMEOUT_S = 300


def run_notebook(name: str, folder: Path, **parameters: object) -> Path:
    """``notebooks/<name>.ipynb`` executed by papermill into ``folder`` with ``parameters`` (as
    ``papermill ... -p db PATH`` runs it); raises on any cell's error."""
    import papermill

    target = folder / f"{name}.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(target), parameters=parameters,
                               kernel_name="python3", cwd=str(folder), progress_bar=False,
                               execution_timeout=CELL_TIMEOUT_S)
    return target


def cited(path: Path) -> dict:
    """The JSON the notebook's last cell prints ("the numbers to cite")."""
    last = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"][-1]
    (text,) = [o["text"] for o in last["outputs"] if o["output_type"] == "stream"]
    return json.loads(text)


def outputs(path: Path) -> list[dict]:
    return [o for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code" for o in c["outputs"]]


def committed_problems(book: nbformat.NotebookNode) -> list[str]:
    """What a committed notebook must not carry: outputs, execution counts, a run's widget state or
    papermill's record of a run."""
    out = [f"cell {i}: " + ("outputs" if c.get("outputs") else "an execution count")
           for i, c in enumerate(book.cells) if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count"))]
    out += [f"metadata: {key}" for key in ("widgets", "papermill") if key in book.metadata]
    out += [f"cell {i}: papermill's record" for i, c in enumerate(book.cells) if "papermill" in c.metadata]
    return out


@pytest.fixture(scope="module")
def executed(morning_db: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("notebooks")
    return {name: run_notebook(name, folder, db=str(morning_db)) for name in NAMES}


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile-nb") / "hostile.duckdb"
    with Store(path) as st:
        assert ingest_bytes(st, "hostile.prom", hostile_scrapes()).status == "loaded"
    return path


@pytest.fixture
def _cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolated_cli(monkeypatch, tmp_path)


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


# -- committed as source ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_committed_notebook_has_no_outputs_and_a_parameters_cell(name: str) -> None:
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(book)
    assert committed_problems(book) == []
    (params,) = [c for c in book.cells if "parameters" in c.metadata.get("tags", [])]
    names = {line.split("=", 1)[0].strip() for line in params.source.splitlines()
             if "=" in line and not line.lstrip().startswith("#")}
    assert names == PARAMETERS[name]
    assert book.metadata.kernelspec.name == "python3"


def test_the_committed_check_catches_an_executed_notebook(executed: dict[str, Path]) -> None:
    problems = committed_problems(nbformat.read(executed["postmortem"], as_version=4))
    assert "metadata: papermill" in problems and any(p.endswith(": outputs") for p in problems)
    assert set(committed_problems(nbformat.read(executed["whatif"], as_version=4))) >= {"metadata: widgets"}


# -- run top to bottom ------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_each_notebook_runs_and_shows_tables_and_charts_not_dicts(executed: dict[str, Path], name: str) -> None:
    shown_ = outputs(executed[name])
    assert not [o for o in shown_ if o["output_type"] == "error"]
    html = [o["data"]["text/html"] for o in shown_ if "text/html" in o.get("data", {})]
    assert any('<div class="tidelens">' in h and "<table>" in h for h in html), name
    assert any("application/vnd.plotly.v1+json" in o.get("data", {}) for o in shown_), name
    # a library object's plain repr (a dict, a dataclass dump) is never what a cell shows
    plain_only = [o["data"]["text/plain"] for o in shown_ if set(o.get("data", {})) == {"text/plain"}]
    assert not [p for p in plain_only if p.startswith(("{", "Event(", "PoolAnswer(", "Review("))], plain_only


def test_the_postmortem_is_tidelens_events_and_the_tail_events_pages(executed, morning_db, capsys, _cli) -> None:
    mine = cited(executed["postmortem"])
    listed = _cli_json(capsys, "events", "--db", str(morning_db), "--json")
    assert mine["events"] == len(listed)
    longest = max(listed, key=lambda e: (_minutes(e), e["peak_p99_ms"]))
    assert (mine["event"], mine["service"], mine["cause"], mine["shares"], mine["misattributed"]) == \
        (longest["id"], longest["service"], longest["cause"], longest["shares"], longest["misattributed"])
    # the Tail events page's headline names the same event, from the same events
    lens = open_store(morning_db)
    page = open_store_link(morning_db, "pages/events.py")
    said = [shown(m.value) for m in page.markdown if "The longest" in m.value]
    assert said == [shown(events_headline(lens.events().events, "UTC"))]
    assert mine["service"] in said[0]


def _minutes(e: dict) -> float:
    return (parse_time_ms(e["end"]) - parse_time_ms(e["start"])) / 60_000


def test_the_postmortem_takes_its_parameters_as_tidelens_events_takes_its_flags(morning_db, capsys, _cli,
                                                                            tmp_path) -> None:
    """``-p start -p end -p slo_ms -p event -p tz``: the event named (not the longest) of the
    range and SLO given, as ``tidelens events --from --to --slo-ms`` lists it."""
    start, end = "2026-10-05T00:00:00Z", "2026-10-07T00:00:00Z"
    listed = _cli_json(capsys, "events", "--db", str(morning_db), "--from", start, "--to", end, "--slo-ms", "800",
                       "--json")
    chosen = min(listed, key=lambda e: (_minutes(e), e["id"]))  # the shortest: never the default
    out = run_notebook("postmortem", tmp_path, db=str(morning_db), start=start, end=end, slo_ms=800.0,
                       event=chosen["id"], tz="Europe/Berlin")
    mine = cited(out)
    assert mine["events"] == len(listed) and len(listed) >= 2
    assert (mine["event"], mine["cause"], mine["shares"]) == (chosen["id"], chosen["cause"], chosen["shares"])
    doc = [o["data"]["text/html"] for o in outputs(out) if "Postmortem" in o.get("data", {}).get("text/html", "")]
    assert doc and "Europe/Berlin" in doc[0]  # the document's times in the zone asked for


def test_the_capacity_review_of_a_range_too_short_to_calibrate_says_why(morning_db, tmp_path) -> None:
    out = run_notebook("capacity-review", tmp_path, db=str(morning_db), start="2026-10-05T03:00:00Z",
                       end="2026-10-05T03:30:00Z")
    mine = cited(out)
    assert mine["best_policy"] is None and "can be calibrated" in mine["review_missing"]["what-if"]
    said = "".join(o.get("text", "") for o in outputs(out) if o["output_type"] == "stream")
    assert "no what-if for this range: no service of pool 'default' can be calibrated" in said


def test_the_review_notebook_is_tidelens_whatif_and_events(executed, morning_db, capsys, _cli) -> None:
    mine = cited(executed["capacity-review"])
    pool = _cli_json(capsys, "whatif", "--db", str(morning_db), "--json")["pool"]
    assert mine["best_policy"] == pool["best_policy"] == mine["review_best_policy"]
    assert mine["minutes"] == pytest.approx({p: v["violation_minutes"] for p, v in pool["policies"].items()})
    assert mine["payer"] == pool["payer"]
    listed = _cli_json(capsys, "events", "--db", str(morning_db), "--json")
    by_cause: dict[str, int] = {}
    for e in listed:
        by_cause[e["cause"]] = by_cause.get(e["cause"], 0) + 1
    assert mine["events_by_cause"] == by_cause
    # `tidelens review --json`'s pool answer is `tidelens whatif --json`'s (tests/test_default_answer.py)


def test_the_whatif_notebook_opens_on_the_pools_answer(executed, morning_db) -> None:
    mine = cited(executed["whatif"])
    # the sliders' Output holds the answer, drawn as the table a cell shows
    state = nbformat.read(executed["whatif"], as_version=4).metadata["widgets"][
        "application/vnd.jupyter.widget-state+json"]["state"]
    (drawn,) = [m["state"]["outputs"] for m in state.values() if m["model_name"] == "OutputModel"]
    html = drawn[0]["data"]["text/html"]
    assert "What-if: pool" in html and "<table>" in html and f"{mine['best_policy']}" in html
    assert {m["state"]["description"] for m in state.values() if m["model_name"] in ("IntSliderModel", "FloatSliderModel")} \
        == {"reservation GPUs", "eviction, min", "traffic x"}
    with Store(morning_db, read_only=True) as st:
        answer = answer_store(st)
    assert mine["best_policy"] == answer.best_policy
    assert mine["minutes"] == pytest.approx({p: o.violation_minutes for p, o in answer.outcomes.items()})


def test_a_slider_move_is_the_what_if_pages_answer(morning_db) -> None:
    """The notebook's sliders answer as the page's form does (analytics.whatif.answer.answer_for
    with the edited service's scenario and the transforms): the same numbers, move by move."""
    whatif = open_store(morning_db).whatif()
    base = whatif.bases()[whatif.service]
    assert whatif.answer().as_dict() == answer_for(whatif.pool, days=whatif.days).as_dict()
    for reservation, growth in ((20, 1.0), (-1, 1.3), (8, 0.8)):
        grown = Transforms(traffic_growth=growth)
        edited = apply_transforms(apply_edits(base, {"pool.reservation_gpus": reservation}), grown)
        page = answer_for(whatif.pool, days=whatif.days, edited=whatif.service, scenario=edited, transforms=grown)
        assert whatif.answer(reservation_gpus=reservation, traffic_growth=growth).as_dict() == page.as_dict()
    # a costlier eviction costs batch under the policies that evict, never inference's minutes
    cheap, dear = whatif.answer(restore_min=0.0), whatif.answer(restore_min=60.0)
    assert dear.outcomes["shared"].violation_minutes == cheap.outcomes["shared"].violation_minutes
    assert dear.outcomes["preemption"].batch_lost_gpu_hours > cheap.outcomes["preemption"].batch_lost_gpu_hours


# -- a second store, hostile labels ------------------------------------------------------------


def test_the_postmortem_runs_on_a_second_store_and_shows_hostile_labels_as_text(hostile_db, tmp_path) -> None:
    out = run_notebook("postmortem", tmp_path, db=str(hostile_db))
    assert cited(out)["service"] == SERVICE
    html = "".join(o["data"]["text/html"] for o in outputs(out) if "text/html" in o.get("data", {}))
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "\\u202e" in html  # the labels, as text
    assert "<b>x</b>" not in html and "\u202e" not in html and "<img" not in html


def test_every_repr_escapes_hostile_labels(hostile_db) -> None:
    lens = open_store(hostile_db)
    shown_ = [lens._repr_html_(), lens.timelines()._repr_html_(), lens.events()._repr_html_(),
              lens.event()._repr_html_(), lens.postmortem()._repr_html_(), lens.whatif().answer()._repr_html_(),
              lens.review()._repr_html_()]
    for html in shown_:
        assert "<b>x</b>" not in html and "\u202e" not in html and "<img" not in html and "<script" not in html
    # the labels are there, as text: the service's in every card, the workload's in the holders
    assert all(html_text(SERVICE) in h for h in shown_[1:4])
    assert html_text(RTL) in shown_[4] and html_text(RTL) == "rec\\u202eommender&lt;b&gt;x&lt;/b&gt;"
    # the frames a lens hands over show the bidi override as an escape too (polars' own HTML would not)
    holders = [str(v) for row in lens.holders().rows() for v in row]
    assert not [c for c in holders if "\u202e" in c] and any("rec\\u202eommender" in c for c in holders)
    assert not [v for row in lens.events().table().rows() for v in row if "\u202e" in str(v)]


def test_a_lens_refuses_what_it_cannot_answer_in_words(morning_db, tmp_path) -> None:
    with pytest.raises(ConfigError, match="no such store; build one with `tidelens ingest"):
        open_store(tmp_path / "nowhere.duckdb")
    with pytest.raises(ConfigError, match="not an IANA time zone"):
        open_store(morning_db, tz="Mars/Olympus")
    lens = open_store(morning_db)
    with pytest.raises(ConfigError, match="ev-000000000000: no such event"):
        lens.event("ev-000000000000")
    with pytest.raises(NotEnoughDataError, match="no tail events of service 'nobody'"):
        lens.event(service="nobody")
    for bad in (0, -5, float("nan"), "800", True):
        with pytest.raises(ConfigError, match="an SLO is a positive, finite number"):
            lens.with_slo(bad)
    with pytest.raises(ConfigError, match="'chat_vllm': no such service in this store's range; its services: "
                                          "chat-vllm, recommender"):
        lens.with_slo(per_service={"chat_vllm": 800}).slos()
    assert lens.with_slo(per_service={"chat-vllm": 800}).slos().for_services(["chat-vllm"]) == {"chat-vllm": 800.0}
    for bad in (True, 1.5, "yesterday-ish"):
        with pytest.raises(ConfigError):
            lens.between(bad)
    assert lens.between(numpy.int64(1_759_622_400_000)).start_ms == 1_759_622_400_000
    strict = lens.with_detection(min_duration_min=30.0)
    assert {e.id for e in strict.events().events}.isdisjoint({e.id for e in lens.events().events}) or \
        len(strict.events().events) < len(lens.events().events)
    assert all(e.duration_min >= 30 for e in strict.events().events)
    # a narrower range is a new lens, its own events
    day = lens.between("2026-10-05T00:00:00Z", "2026-10-06T00:00:00Z")
    assert isinstance(day, Lens) and day.start_ms is not None
    assert {e.id for e in day.events().events} < {e.id for e in lens.events().events} or not day.events().events


# -- in JupyterLab, in Chromium ----------------------------------------------------------------


@contextmanager
def jupyterlab(root: Path, home: Path) -> Iterator[str]:
    """``jupyter lab`` on ``root`` on a free port (its config and runtime in ``home``, no update
    or news checks: no network), yielding its base address; stopped after."""
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces")}
    # --allow-root: CI runs as root (JupyterLab refuses it otherwise); the token still guards it.
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           f"--IdentityProvider.token={JUPYTER_TOKEN}", f"--ServerApp.root_dir={root}",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.news_url=None"]
    log = open(home / "jupyter.log", "w")  # noqa: SIM115 - the server owns it
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_answering(f"{base}/api/status?token={JUPYTER_TOKEN}", proc, home / "jupyter.log")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _wait_answering(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 90.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            try:  # refused at once: wait on the process, not a sleep
                proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                pass
    raise TimeoutError(f"jupyter lab did not answer at {url}: {log.read_text()[-2000:]}")


def test_make_notebook_serves_the_notebooks_with_this_checkouts_kernel(tmp_path) -> None:
    """``make notebook``: JupyterLab on notebooks/ (the three notebooks at its root), its python3
    kernel the checkout's .venv (the library importable as the app imports it)."""
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    args = f"--no-browser --ServerApp.port={port} --IdentityProvider.token={JUPYTER_TOKEN}"
    log = open(tmp_path / "make.log", "w")  # noqa: SIM115 - the server owns it
    proc = subprocess.Popen(["make", "-s", "notebook", f"NOTEBOOK_ARGS={args}"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_answering(f"{base}/api/status?token={JUPYTER_TOKEN}", proc, tmp_path / "make.log")
        with urllib.request.urlopen(f"{base}/api/contents?token={JUPYTER_TOKEN}", timeout=10) as r:
            listed = {item["name"] for item in json.load(r)["content"]}
        assert {f"{name}.ipynb" for name in NAMES} <= listed
        with urllib.request.urlopen(f"{base}/api/kernelspecs?token={JUPYTER_TOKEN}", timeout=10) as r:
            spec = json.load(r)["kernelspecs"]["python3"]["spec"]
        # the native kernel: jupyter_client starts it with the server's own interpreter, and the
        # server is the checkout's .venv/bin/jupyter, as the Makefile runs it
        assert spec["argv"][:3] == ["python", "-m", "ipykernel_launcher"]
        assert (ROOT / ".venv" / "bin" / "jupyter").read_text().splitlines()[0] == f"#!{ROOT / '.venv' / 'bin' / 'python'}"
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()


def open_in_jupyterlab(page, base: str, notebook: str, text: str, timeout_ms: int = 120_000) -> None:
    """Open ``notebook`` in JupyterLab at ``base`` and wait until an output's table shows ``text``."""
    page.goto(f"{base}/lab/tree/{notebook}?token={JUPYTER_TOKEN}", wait_until="domcontentloaded")
    page.wait_for_selector(f".jp-OutputArea-output table >> text={text}", timeout=timeout_ms)


@pytest.mark.browser
def test_jupyterlab_in_chromium_renders_the_postmortems_event_table(executed, tmp_path) -> None:
    _need_browser()
    from playwright.sync_api import sync_playwright

    book = tmp_path / "lab"
    book.mkdir()
    (book / "postmortem.ipynb").write_bytes(executed["postmortem"].read_bytes())
    event = cited(executed["postmortem"])["event"]
    with jupyterlab(book, tmp_path) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            open_in_jupyterlab(page, base, "postmortem.ipynb", event)
            cells = page.locator(".jp-OutputArea-output .tidelens table").count()
            assert cells >= 2  # the events table and the event's shares, as tables
            header = page.locator(".jp-OutputArea-output .tidelens table th").all_inner_texts()
            assert {"id", "service", "cause"} <= set(header)
        finally:
            browser.close()
