"""``tidelens review`` and the Overview's capacity-review download: one self-contained file with
the pool, the rhythm and collision, the tail events, the what-if and the bill, each with its
finding; the same numbers as the pages and the other commands; labels escaped; a store that
cannot support a part says so instead of showing a preset's numbers."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from apptest_helpers import isolated_cli
from test_hostile_labels import FORMULA, SERVICE, TEAM, hostile_scrapes

from analytics.cli import main
from analytics.document import render_markdown
from analytics.ingest import ingest_bytes
from analytics.review import review_document, review_html, review_store
from analytics.store import Store
from analytics.slo import SloTable

pytestmark = [pytest.mark.slow]
APP = Path(__file__).resolve().parent.parent / "app.py"
SECTIONS = ["The pool", "Rhythm and collision", "Tail events", "What-if (modelled)", "Chargeback (modelled)",
            "Forecast (modelled)"]


@pytest.fixture(scope="module")
def db(morning_db: Path) -> Path:
    return morning_db  # the session's one build of this store (tests/conftest.py), read only


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolated_cli(monkeypatch, tmp_path)


def _cli_json(capsys, *argv: str):
    assert main(list(argv)) == 0
    out = capsys.readouterr().out
    return json.loads(out[out.index("{"):] if not out.lstrip().startswith(("{", "[")) else out)


def test_review_html_is_one_offline_file_with_every_section(db, tmp_path, capsys) -> None:
    out = tmp_path / "review.html"
    numbers = _cli_json(capsys, "review", "--db", str(db), "--out", str(out), "--json")
    text = out.read_text(encoding="utf-8")
    assert re.findall(r"<h2>([^<]*)</h2>", text) == [s.replace("&", "&amp;") for s in SECTIONS]
    findings = re.findall(r'<p class="finding">([^<]*)</p>', text)
    assert len(findings) == 6 and all(f.endswith(".") for f in findings)
    # plotly.js embedded once, and nothing fetched from anywhere
    assert len(re.findall(r"plotly\.js v\d", text)) == 1
    assert text.count('class="plotly-graph-div"') == 5  # pool story, hour of week, typical day, bills, the horizon ahead
    assert not re.search(r'<(script|link|img|iframe)[^>]+(src|href)="(https?:)?//', text)
    # the findings say what the numbers say
    assert f"A pool of {numbers['pool_gpus']:,.0f} GPUs" in findings[0]
    # the Overview's sentence, its minutes naming their scope; the Rhythm page's, its hours a clock's
    assert re.search(r"some service's p99 was over its SLO for [\d,]+ minutes, observed \(chat-vllm [\d,]+ min, ",
                     html.unescape(findings[0])), findings[0]
    assert re.search(r"peaks at \d\d:\d\d \(UTC\); batch typically starts at \d\d:\d\d ", findings[1]), findings[1]
    ev = numbers["events"]
    assert findings[2].startswith(f"{ev['count']} tail events")
    assert f"{ev['misattributed']} were batch contention a dashboard would blame on users" in findings[2]
    assert numbers["missing"] == {}
    assert f"workload map {numbers['map_digest']}" in text and numbers["map_digest"]  # the map it was computed with


def test_review_numbers_are_the_other_commands_numbers(db, capsys) -> None:
    review = _cli_json(capsys, "review", "--db", str(db), "--json")
    events = _cli_json(capsys, "events", "--db", str(db), "--json")
    assert review["events"]["ids"] == [e["id"] for e in events]
    assert review["events"]["count"] == len(events)
    assert review["events"]["misattributed"] == sum(e["misattributed"] for e in events)
    # Both name the workload map they were computed with (the audit record's digests).
    from analytics.workloads import WorkloadMap, map_digest
    assert events and {e["map_digest"] for e in events} == {review["map_digest"]} == {map_digest(WorkloadMap())}
    service = review["whatif"]["service"]
    whatif = _cli_json(capsys, "whatif", "--db", str(db), "--service", service, "--json")
    assert review["whatif"]["backtest"] == whatif["backtest"]
    assert review["whatif"]["pool_gpus"] == whatif["scenario"]["pool_gpus"] == review["pool_gpus"] == 64
    for name, summary in whatif["policies"].items():
        got = review["whatif"]["policies"][name]
        assert got["violation_minutes"] == summary["violation_minutes"], name
    # the backtest's observed minutes are the pool section's minutes over the SLO for that service
    assert review["minutes_over_slo"][service] == whatif["backtest"]["observed_violation_minutes"]
    assert review["gpu_hours"]["batch"] == pytest.approx(whatif["backtest"]["observed_batch_gpu_hours"], abs=0.05)
    capacity = review["gpu_hours"].pop("capacity")
    assert sum(review["gpu_hours"].values()) == pytest.approx(capacity, abs=0.5)
    # the last section is `tidelens forecast`'s at the store's end: the same next day and actions
    forecast = _cli_json(capsys, "forecast", "--db", str(db), "--json")["forecast"]
    nxt = next(d for d in forecast["days"] if d["day"] == review["forecast"]["next_day"]["day"])
    assert review["forecast"]["next_day"] == nxt and review["forecast"]["actions"] == forecast["actions"]


def test_the_overview_download_is_the_cli_review(db, capsys) -> None:
    from streamlit.testing.v1 import AppTest

    from analytics.review import STAGES
    from pages._queries import review_for

    at = AppTest.from_file(str(APP), default_timeout=180)
    at.query_params.update({"source": "duckdb", "db": str(db)})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # The review takes seconds: a button makes it in the run (its stage in a status, never a
    # silent wait), then its download is in the button's place.
    assert not at.get("download_button")
    at.button(key="ov_review_make").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [b.proto.label for b in at.get("download_button")] == ["Download: Capacity review (HTML)"]
    v, src = at.session_state["view"], at.session_state["view_source"]
    heard: list[str] = []
    page = review_for(v, src, heard.append).numbers().as_dict()
    assert heard == [STAGES[s] for s in ("timelines", "events", "rhythm", "calibration", "policies", "change",
                                         "forecast")], heard
    cli = _cli_json(capsys, "review", "--db", str(db), "--json")
    for key in ("pool_gpus", "gpu_hours", "minutes_over_slo", "slo_ms", "events", "whatif", "missing", "forecast"):
        assert page[key] == cli[key], key
    html_text = at.session_state["ov_review_made"][1]
    assert "<h1>Capacity review</h1>" in html_text and html.escape(src.label) in html_text
    assert re.findall(r"<h2>([^<]*)</h2>", html_text) == [s.replace("&", "&amp;") for s in SECTIONS]


def test_hostile_labels_stay_text(tmp_path) -> None:
    path = tmp_path / "hostile.duckdb"
    with Store(path) as st:
        assert ingest_bytes(st, "hostile.prom", hostile_scrapes()).status == "loaded"
    with Store(path, read_only=True) as st:
        review = review_store(st)
    text = review_html(review)
    body = re.sub(r"<script.*?</script>", "", text, flags=re.S)  # plotly's own code and figure JSON
    # HTML: a label is text in a cell or a sentence; its markup is escaped, never a tag
    assert "<b>x</b>" not in body
    assert SERVICE in body and html.escape(FORMULA) in body and FORMULA not in body  # the batch team
    assert not re.search(r'<(img|a|iframe)\b', body)
    # Markdown: a label that would make an image, a link or a tag is shown as a code span
    markdown, _ = render_markdown(review_document(review))
    assert SERVICE in markdown
    outside_code = re.sub(r"`[^`]*`", "", markdown)
    for raw in (SERVICE, TEAM, "<b>x</b>", "](http"):
        assert raw not in outside_code, raw


def test_a_store_without_latency_says_what_is_missing(tmp_path, capsys) -> None:
    path = tmp_path / "gpus-only.duckdb"
    lines = [f'DCGM_FI_DEV_GPU_UTIL{{gpu="{g}",UUID="GPU-{g}",Hostname="n1"}} 50 {1_764_316_800_000 + m * 60_000}'
             for m in range(120) for g in range(4)]
    with Store(path) as st:
        assert ingest_bytes(st, "gpus.prom", ("\n".join(lines) + "\n").encode()).status == "loaded"
    out = tmp_path / "r.html"
    numbers = _cli_json(capsys, "review", "--db", str(path), "--out", str(out), "--json")
    assert "whatif" not in numbers and "what-if" in numbers["missing"]
    assert numbers["pool_gpus"] == 4
    text = out.read_text()
    assert "No what-if shown" in text and "No bill" in text
    assert "ml-research" not in text and "morning-ramp" not in text  # never a preset's team or name


def test_review_markdown_writes_its_charts_beside_it(db, tmp_path, capsys) -> None:
    out = tmp_path / "review.md"
    assert main(["review", "--db", str(db), "--out", str(out)]) == 0
    written = [line.split(" ", 1)[1] for line in capsys.readouterr().out.splitlines() if line.startswith("wrote ")]
    assert written[0] == str(out) and len(written) == 6
    text = out.read_text()
    for name in written[1:]:
        assert Path(name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({Path(name).name})" in text
    assert [line[3:] for line in text.splitlines() if line.startswith("## ")] == SECTIONS


@pytest.mark.parametrize("argv,said", [
    (["--out", "r.pdf"], "written as .html or .md"),
    ([], "--out review.html"),
    (["--out", "r.html", "--tz", "Mars/Olympus"], "not an IANA time zone"),
])
def test_bad_arguments_say_what_to_do(db, capsys, argv, said) -> None:
    assert main(["review", "--db", str(db), *argv]) == 2
    assert said in capsys.readouterr().err


def test_a_missing_store_is_named(tmp_path, capsys) -> None:
    assert main(["review", "--db", str(tmp_path / "nope.duckdb"), "--json"]) == 2
    assert "nope.duckdb: no such store" in capsys.readouterr().err


def test_the_review_works_on_a_range_longer_than_the_whatif_replays(db, monkeypatch, tmp_path, capsys) -> None:
    """The bundled sample's 21 days against the what-if's 7 crashed the review (the typical day
    read the whole range's hours beside the last days' p99s): the same shape, made cheap here
    by replaying 2 of the store's 3 days."""
    import analytics.review.build as review_mod

    monkeypatch.setattr(review_mod, "MODEL_DAYS", 2)  # the review's replay length, as its builder imported it
    out = tmp_path / "review.html"
    assert main(["review", "--db", str(db), "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    numbers = json.loads(captured.out)  # stdout is the JSON alone; the written path on stderr
    assert f"wrote {out}" in captured.err
    text = out.read_text(encoding="utf-8")
    assert text.count('class="plotly-graph-div"') == 5
    whatif = _cli_json(capsys, "whatif", "--db", str(db), "--service", numbers["whatif"]["service"],
                       "--days", "2", "--json")
    for name, summary in whatif["policies"].items():
        assert numbers["whatif"]["policies"][name]["violation_minutes"] == summary["violation_minutes"]
    # one best policy, named by the review's finding and by both commands' JSON
    best = numbers["whatif"]["best_policy"]
    assert best == whatif["best_policy"] and best in numbers["whatif"]["policies"]
    finding = html.unescape(re.findall(r'<p class="finding">([^<]*)</p>', text)[3])
    assert "Best policy for pool 'default' (chat-vllm and recommender, each against its own SLO, " in finding
    assert f"over the last 2 days): {best}, " in finding


def test_the_review_and_the_table_name_the_same_best_policy(db) -> None:
    from analytics.measures import best_policy, pool_outcomes
    from analytics.whatif.ledger import policy_table

    with Store(db, read_only=True) as st:
        review = review_store(st)
    # the pool's: every service replayed, judged by the one rule; the breakdown's table marks it
    by_service = {r.service: {n: x.summary for n, x in r.results.items()} for r in review.answer.replays}
    assert set(by_service) == {"chat-vllm", "recommender"}
    table = policy_table(review.results, best=review.best_policy)
    marked = [row["policy"] for row in table.iter_rows(named=True) if "best for the pool" in row["best"]]
    assert marked == [best_policy(pool_outcomes(by_service))] == [review.best_policy]
    summaries = by_service[review.calibration.observation.service]
    # whole minutes first, then the cheaper: a tenth of a minute is no lead over $400
    near = {"shared": replace(summaries["shared"], violation_minutes=10.4, cost_total=500.0),
            "partitioned": replace(summaries["shared"], violation_minutes=10.2, cost_total=900.0)}
    assert best_policy(near) == "shared"


def test_a_right_to_left_override_is_shown_not_obeyed_in_both_reports(tmp_path) -> None:
    """A U+202E in a service name shows as ``\\u202e`` on the page; the downloaded reports drew
    it raw (reversing the text after it). Both now go through one HTML writer."""
    from analytics.events import EventsConfig, analyse_store
    from analytics.postmortem import report_html

    name = "chat\u202egnp.exe"
    lines = []
    for m in range(180):
        t = 1_780_000_000_000 + m * 60_000
        slow = 60 <= m < 90
        for le, c in (("0.1", 0 if slow else 90), ("1", 50 if slow else 100), ("+Inf", 100)):
            lines.append(f'http_server_request_duration_seconds_bucket{{service="{name}",le="{le}"}} '
                         f'{(m + 1) * c} {t}')
        lines.append(f'http_server_request_duration_seconds_count{{service="{name}"}} {(m + 1) * 100} {t}')
    path = tmp_path / "rtl.duckdb"
    with Store(path) as st:
        assert ingest_bytes(st, "rtl.prom", ("\n".join(lines) + "\n").encode()).status == "loaded"
    with Store(path, read_only=True) as st:
        review = review_store(st)
        events = analyse_store(st, EventsConfig(), slos=SloTable.from_ms({name: 100.0}))
    body = re.sub(r"<script.*?</script>", "", review_html(review), flags=re.S)
    assert "\u202e" not in body and "chat\\u202egnp.exe" in body
    assert events.events, "the slow half hour is a tail event"
    report = re.sub(r"<script.*?</script>", "", report_html(events, events.events[0]), flags=re.S)
    assert "\u202e" not in report and "chat\\u202egnp.exe" in report


def test_the_review_says_what_the_whatif_page_says(db, capsys) -> None:
    """The capacity review carries the What-if page's sentence (Tail events' batch minutes beside
    what partitioning removes) from the same function, in its JSON and its what-if section."""
    from analytics.whatif.agree import pool_agreement

    with Store(db, read_only=True) as st:
        review = review_store(st)
    agreed = review.agreement
    assert agreed is not None and agreed.events >= 1
    again = pool_agreement(review.events, review.answer)
    assert agreed.as_dict() == again.as_dict()
    numbers = review.numbers().whatif
    assert numbers is not None and numbers.agreement is not None
    assert numbers.agreement.sentence() == agreed.sentence()
    assert numbers.agreement.tail_batch_minutes > 0 and numbers.agreement.agrees
    text = review_html(review)
    assert agreed.sentence().split(";")[0] in text and "batch done (GPU-h)" in text
