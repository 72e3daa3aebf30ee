"""One number, one definition: the pages and the CLI show the same numbers for the same store.

A simulated store (the morning story, 3 weekdays) is opened by every page that shows a shared
number, through AppTest, and by the CLI; the numbers read off the rendered elements must equal
each other and the CLI's JSON: the tail events and their ids (a copied id works in `tidelens
report`), each service's minutes over the SLO (Overview, the What-if backtest, `tidelens
whatif --json`), the pool size (Overview, What-if, CLI), and the SLO each service is judged by
(the store declares the sample's: the app and the CLI read it there). On an export variant the
capacity review's JSON is set against the other commands' (best policy included).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from apptest_helpers import event_chooser, isolated_cli, metric, open_store_link, tables

from analytics.cli import main
from analytics.times import parse_time_ms

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def db(morning_db: Path) -> Path:
    return morning_db  # the session's one build of this store (tests/conftest.py), read only


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolated_cli(monkeypatch, tmp_path)


_page = open_store_link


def test_events_and_ids_are_the_same_in_the_app_and_the_cli(db, capsys, tmp_path):
    assert main(["events", "--db", str(db), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert len(cli) >= 3
    at = _page(db, "pages/events.py")
    # The page's list of events, in its order, holds the CLI's ids (an id is the chooser's value).
    chooser = event_chooser(at)
    assert [chooser.format_func(e["id"]) for e in cli] == chooser.options
    # the longest (the headline's event), chosen, in the link
    longest = max(cli, key=lambda e: (parse_time_ms(e["end"]) - parse_time_ms(e["start"]), e["peak_p99_ms"]))
    assert at.query_params["event"] == longest["id"]
    assert int(metric(at, "Tail events")) == len(cli)
    # the sample's own SLOs, declared by the store, judged both: chat 1 s, recommender 100 ms
    assert {e["service"]: e["evidence"]["slo_ms"] for e in cli} == {"chat-vllm": 1000.0, "recommender": 100.0}
    # an id copied from the page opens its postmortem from the CLI
    out = tmp_path / "pm.md"
    assert main(["report", "--db", str(db), "--event", at.query_params["event"], "--out", str(out)]) == 0
    assert out.exists()


def test_minutes_over_the_slo_and_pool_size_agree_across_pages_and_cli(db, capsys):
    overview = _page(db, "pages/overview.py")
    per_service = next(m.help for m in overview.metric if m.label == "Minutes over the SLO, any service, observed")
    minutes = {name: float(n.replace(",", "")) for name, n in re.findall(r"([\w-]+) ([\d,]+)",
                                                                       per_service.split("each service's: ")[1])}
    assert set(minutes) == {"chat-vllm", "recommender"} and min(minutes.values()) > 0
    pool = metric(overview, "Pool size")
    assert pool == "64 GPUs"
    for service in ("chat-vllm", "recommender"):
        assert main(["whatif", "--db", str(db), "--service", service, "--json", "--policy", "shared"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["backtest"]["observed_violation_minutes"] == minutes[service]
        assert out["scenario"]["pool_gpus"] == 64
        whatif = _page(db, "pages/whatif.py", w_src="store", w_svc=service)
        observed = metric(whatif, f"Minutes over the SLO, {service}, observed")
        assert float(observed.replace(",", "")) == minutes[service]
        assert any("· 64 GPUs ·" in c.value for c in whatif.caption)


def test_gpu_hours_held_agree_across_overview_whatif_and_cli(db, capsys):
    overview = _page(db, "pages/overview.py")
    help_text = next(m.help for m in overview.metric if m.label == "Pool GPU-hours")
    held = {cls: float(n.replace(",", "")) for cls, n in re.findall(r"(\w+) ([\d,]+)", help_text)}
    capacity = float(metric(overview, "Pool GPU-hours").replace(",", ""))
    # capacity = every class held + idle (one definition: GPUs times the step's hours)
    assert {"inference", "batch", "other", "idle"} <= set(held) and held["batch"] > 0
    assert sum(held.values()) == pytest.approx(capacity, abs=len(held))  # each rounded
    assert main(["whatif", "--db", str(db), "--service", "chat-vllm", "--json", "--policy", "shared"]) == 0
    cli = json.loads(capsys.readouterr().out)["backtest"]
    assert round(cli["observed_batch_gpu_hours"]) == held["batch"]
    whatif = _page(db, "pages/whatif.py", w_src="store", w_svc="chat-vllm")
    assert float(metric(whatif, "Batch GPU-hours, observed").replace(",", "")) == held["batch"]
    # Chargeback bills the same pool the What-if replays (its caption names the pool's size)
    chargeback = _page(db, "pages/chargeback.py", w_src="store", w_svc="chat-vllm")
    assert any("· 64 GPUs" in c.value for c in chargeback.caption)
    # and says the same sentence: tail events' batch minutes against what partitioning removes
    said = [i.value for i in whatif.info if "Tail events attribute" in i.value]
    assert len(said) == 1 and said == [i.value for i in chargeback.info if "Tail events attribute" in i.value]
    # and bills only teams the store has (never a preset's), plus the partitioned plan's tenants
    from analytics.store import Store
    from analytics.whatif.policies import CLASS_B_TEAM
    from analytics.workloads import classify_workloads, load_map

    with Store(db, read_only=True) as st:
        teams = set(classify_workloads(st, load_map(None))["team"].drop_nulls())
    billed = {t for df in tables(chargeback) if "team" in df.value.columns for t in df.value["team"]}
    assert billed and billed <= teams | {CLASS_B_TEAM}, billed - teams


@pytest.fixture(scope="module")
def variant_db(tmp_path_factory) -> Path:
    """Another cluster's export of the story: HPAs named by prefix, no kube-state-metrics pods."""
    from analytics.sample import load_into, simulate
    from analytics.store import Store

    path = tmp_path_factory.mktemp("agree-variant") / "variant.duckdb"
    with Store(path) as st:
        load_into(st, simulate("morning", days=3, gpus=48, seed=5, variants=("hpa-prefix", "no-ksm-pods")))
    return path


def test_the_review_and_every_command_agree_on_an_export_variant(variant_db, capsys):
    """The capacity review's numbers are the other commands' on a store the sample is not: the
    events and their ids, each service's minutes over the SLO (the what-if's observed minutes),
    the batch GPU-hours, the best policy and every policy's minutes."""
    def cli(*argv: str):
        assert main(list(argv)) == 0
        return json.loads(capsys.readouterr().out)

    review = cli("review", "--db", str(variant_db), "--json")
    events = cli("events", "--db", str(variant_db), "--json")
    assert review["events"]["ids"] == [e["id"] for e in events] and events
    service = review["whatif"]["service"]
    whatif = cli("whatif", "--db", str(variant_db), "--service", service, "--json")
    assert review["minutes_over_slo"][service] == whatif["backtest"]["observed_violation_minutes"]
    assert review["gpu_hours"]["batch"] == pytest.approx(whatif["backtest"]["observed_batch_gpu_hours"], abs=0.05)
    assert review["whatif"]["best_policy"] == whatif["best_policy"]
    assert {n: p["violation_minutes"] for n, p in review["whatif"]["policies"].items()} == \
        {n: p["violation_minutes"] for n, p in whatif["policies"].items()}
