"""`tidelens pull` through the workload map's recording rules, against a real Prometheus.

The live fleet is backfilled, then the rules of tidelens.example.toml over it with `promtool tsdb
create-blocks-from rules` in passes; a pull reads the recorded series (no device series come
back) and the timelines every page reads equal those of the same data loaded from files. Rules
compiled from another map are detected and said, and the pull falls back to the raw path.
"""

from __future__ import annotations

import live_data as d
import orjson
import polars as pl
import prom_server
import pytest
from test_live_timelines import _same
from test_rules import EXAMPLE

from analytics.cli import main
from analytics.ingest import ingest_bytes
from analytics.live.client import ClientConfig, PromClient
from analytics.live.pull import pull
from analytics.live.route import rules_plan
from analytics.rules import compile_rules
from analytics.store import Store
from analytics.timeline import TimelineConfig, holdings, pool_timeline, service_timeline
from analytics.times import iso_utc
from analytics.workloads import WorkloadMap, load_map

pytestmark = [pytest.mark.prometheus, pytest.mark.xdist_group("prometheus")]
CFG = TimelineConfig(step_s=d.SCRAPE_S, start_ms=d.T0_MS + d.STEP_MS, end_ms=d.END_MS)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A server holding the fleet and the example map's recorded series; a store loaded from the
    fleet's file; a store pulled through the rules, and the plan that pull followed."""
    bins = prom_server.require_binaries()
    if bins is None:
        pytest.skip("prometheus/promtool not installed (apt-get install prometheus)")
    prom, tool = bins
    root = tmp_path_factory.mktemp("rules-prom")
    samples = d.fleet_samples()
    om = prom_server.write_openmetrics(samples, root / "fleet.om")
    prom_server.backfill(tool, om, root / "data")
    wmap = load_map(EXAMPLE)
    server = prom_server.backfill_rules(prom, tool, root / "data", compile_rules(wmap), d.T0_MS, d.END_MS)
    files, pulled = Store(":memory:"), Store(":memory:")
    try:
        ingest_bytes(files, "fleet.om", om.read_bytes())
        with PromClient(server.url, config=ClientConfig(max_points=50), sleep=lambda s: None) as client:
            plan = rules_plan(client, d.T0_MS, d.END_MS, d.STEP_MS, wmap)
            pull(pulled, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS, queries=plan.queries)
        yield server, wmap, files, pulled, plan
    finally:
        files.close()
        pulled.close()
        server.stop()


def test_pull_through_the_rules_gives_the_timelines_of_the_files(recorded) -> None:
    _, wmap, files, pulled, plan = recorded
    # devices, histograms, gauges and the HPA through the rules; families the fleet lacks (no
    # recorded series either) and the per-pod +Inf bucket raw
    assert plan.notes == [] and plan.paths["keep:kube_horizontalpodautoscaler_status_desired_replicas"] == "rules"
    through = {k for k, v in plan.paths.items() if v == "rules"}
    assert through >= {k for k in plan.paths if k.startswith("dev:")} | {
        "svc:vllm:time_to_first_token_seconds_bucket", "svc:vllm:time_to_first_token_seconds_count",
        "svc:vllm:num_requests_running"}
    assert all(v == "raw" for k, v in plan.paths.items() if k.startswith("pod:"))
    # no device series came back: the server summed them by pool, class, team and workload
    metrics = set(pulled.query("SELECT DISTINCT metric FROM series")["metric"])
    assert not any(m.startswith("DCGM_") for m in metrics) and "pool_class_team_workload:tidelens_gpus:sum" in metrics
    _same(pool_timeline(files, CFG, wmap), pool_timeline(pulled, CFG, wmap), ["ts", "pool"])
    want, got = holdings(files, CFG, wmap), holdings(pulled, CFG, wmap)
    keys = ["ts", "pool", "cls", "team", "workload"]
    _same(want.group_by(keys).agg(pl.col("gpus").sum()), got.group_by(keys).agg(pl.col("gpus").sum()), keys)
    assert set(want["cls"]) >= {"inference", "batch", "other", "idle", "unmanaged"}
    _same(service_timeline(files, CFG, wmap), service_timeline(pulled, CFG, wmap), ["service", "ts"])
    # the store says by which path each signal came
    names = pulled.query("SELECT name FROM sources")["name"].to_list()
    assert any("q=rules:pool_class_team_workload:tidelens_gpus:sum" in n for n in names)
    assert any("q=rules:svc:vllm:time_to_first_token_seconds_bucket" in n for n in names)
    assert any("q=pod:" in n for n in names)  # the +Inf bucket per pod stays a raw pull


def test_rules_of_another_map_are_said_and_the_raw_path_taken(recorded, tmp_path, capsys) -> None:
    server, wmap, *_ = recorded
    with PromClient(server.url, sleep=lambda s: None) as client:
        plan = rules_plan(client, d.T0_MS, d.END_MS, d.STEP_MS, WorkloadMap())
    assert set(plan.paths.values()) == {"raw"} and "compiled from another map" in plan.notes[0]
    assert all(not q.key.startswith("rules:") for q in plan.queries)
    # the CLI takes the same path and says why
    argv = ["pull", "--url", server.url, "--from", iso_utc(d.T0_MS), "--to", iso_utc(d.END_MS), "--step", "1m",
            "--db", str(tmp_path / "p.duckdb"), "--json"]
    assert main([*argv, "--config", str(EXAMPLE)]) == 0
    report = orjson.loads(capsys.readouterr().out)
    assert report["rules"]["paths"]["dev:DCGM_FI_DEV_FB_USED"] == "rules" and report["rules"]["notes"] == []
    assert main([*argv, "--config", str(tmp_path / "none.toml")]) == 2  # a --config that is not there
    capsys.readouterr()


def test_promtool_loses_a_blocks_last_evaluation_only_where_the_file_name_says(recorded, tmp_path) -> None:
    """promtool ends each 2-hour block's query at its last whole second: a rules file whose
    name puts the group's evaluations in that second loses one a block, which
    backfill_drops_evaluations foresees (backfill_rules picks a name that does not)."""
    import subprocess

    from analytics.rules.compile import backfill_drops_evaluations

    server, *_ = recorded
    _, tool = prom_server.require_binaries()
    names = {}
    for i in range(2000):  # about one name in 60 is cut
        path = tmp_path / f"r{i}.yml"
        names.setdefault(backfill_drops_evaluations(str(path), "tidelens", 60), path)
        if len(names) == 2:
            break
    start = d.T0_MS // 7_200_000 * 7200 + 7200  # one whole block
    counts = {}
    for cut, path in names.items():
        path.write_text('groups: [{name: tidelens, interval: 60s, rules: [{record: one, expr: "vector(1)"}]}]\n')
        out = tmp_path / f"out-{cut}"
        subprocess.run([tool, "tsdb", "create-blocks-from", "rules", "--quiet", f"--url={server.url}",
                        f"--start={start}", f"--end={start + 7199}", f"--output-dir={out}", str(path)],
                       check=True, capture_output=True, timeout=60)
        (out / "wal").mkdir(exist_ok=True)  # promtool's dump opens the directory as a TSDB
        dump = subprocess.run([tool, "tsdb", "dump", str(out)], check=True, capture_output=True, text=True,
                              timeout=60).stdout
        counts[cut] = sum(1 for line in dump.splitlines() if line.startswith("{"))
    assert counts == {False: 120, True: 119}


def test_parallel_rule_backfill_slices_cover_the_range_on_block_edges() -> None:
    """bench/scale.py runs promtool's rules backfill on slices of the range at once: each slice
    must start on a block's first second (or the range's start) and end on a block's last one
    (or the range's end), with nothing left out or evaluated twice, and promtool refuses a slice
    that starts where it ends."""
    import random

    rnd = random.Random(7)
    # ranges that start or end on a block's edge or a second off it (where a cut can leave a
    # slice of one second), then random ones
    edges = [(a, b, j) for a in (0, 1, 7199, 7200) for b in range(7200, 6 * 7200 + 2, 3600)
             for j in range(1, 9) if a < b - 1]
    edges += [(a, b + d, j) for a, b, j in edges for d in (-1, 1)]
    randoms = [(s := rnd.randrange(0, 10**6), s + rnd.randrange(1, 40 * 7200), rnd.randrange(1, 9))
               for _ in range(2000)]
    for start, end, jobs in edges + randoms:
        got = prom_server.rule_slices(start, end, jobs)
        assert 1 <= len(got) <= jobs and got[0][0] == start and got[-1][1] == end
        assert all(a < b for a, b in got), got
        for (_, b), (a, _) in zip(got, got[1:]):
            assert a == b + 1 and a % 7200 == 0, got
        if end // 7200 - start // 7200 + 1 >= 2 * jobs:  # enough blocks: every process gets some
            assert len(got) == jobs
