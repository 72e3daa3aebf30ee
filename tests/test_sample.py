"""The sample simulator: determinism, the truth's self-consistency per scenario, the morning
story, the exports' formats, and the store fast path against real ingest."""

from __future__ import annotations

import importlib
import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest

from analytics.errors import ConfigError
from analytics.sample import SCENARIOS, load_into, simulate, truth, write_exports
from analytics.sample.cluster import build_topology
from analytics.sample.export import exposition_text, query_range_json
from analytics.sample.series import build_series
from analytics.sample.truth import CAUSES, detect_runs
from analytics.store import Store

DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.fixture(scope="module")
def runs() -> dict[str, object]:
    # 10 days: a week and a half of each scenario (every story told), small enough to keep this file fast.
    from analytics.sample.scenarios import STORY_GPUS

    return {name: simulate(name, days=10, gpus=STORY_GPUS.get(name, 64), seed=3) for name in SCENARIOS}


def _iso_ms(s: str) -> int:
    from datetime import datetime
    return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000)


def test_same_seed_same_run_and_other_seed_differs() -> None:
    a = simulate("morning", days=2, gpus=16, seed=5)
    b = simulate("morning", days=2, gpus=16, seed=5)
    c = simulate("morning", days=2, gpus=16, seed=6)
    assert orjson.dumps(truth(a)) == orjson.dumps(truth(b))
    assert np.array_equal(a.full.requests["chat-vllm"], b.full.requests["chat-vllm"])
    assert not np.array_equal(a.full.requests["chat-vllm"], c.full.requests["chat-vllm"])


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_truth_is_self_consistent(runs, name: str) -> None:
    r = runs[name]
    t = truth(r)
    assert t["scenario"] == name and t["days"] == 10
    ids = [e["id"] for e in t["events"]]
    assert len(ids) == len(set(ids))
    ts0 = r.start_ms
    for e in t["events"]:
        assert e["cause"] in CAUSES
        start, end = _iso_ms(e["start"]), _iso_ms(e["end"])
        assert end - start >= r.scenario.min_event_min * 60_000
        slo = t["slos"][e["service"]]["p99_ms"]
        assert e["peak_p99_ms"] > slo
        a = (start - ts0) // 60_000
        b = (end - ts0) // 60_000
        p99 = r.p99_variants["full"][e["service"]]
        # the event starts and ends on SLO breaches, at its recorded peak
        assert p99[a] > slo and p99[b - 1] > slo
        assert round(float(np.nanmax(p99[a:b])), 1) == e["peak_p99_ms"]
        cf = e["counterfactual"]
        if e["cause"] == "batch_contention":
            assert cf["no_batch"]["removed"] and not cf["no_surge"]["removed"]
            # a batch job held GPUs while it happened
            assert any(_iso_ms(j["start"]) < end and _iso_ms(j["end"]) > start - 3 * 3600_000
                       for j in t["batch_jobs"])
        elif e["cause"] == "traffic_surge":
            assert cf["no_surge"]["removed"] and not cf["no_batch"]["removed"]
            assert any(s["service"] == e["service"] and _iso_ms(s["start"]) < end
                       and _iso_ms(s["end"]) + 30 * 60_000 > start for s in t["surges"])
        elif e["cause"] == "scaling_lag":
            assert not cf["no_batch"]["removed"] and not cf["no_surge"]["removed"] and not cf["neither"]["removed"]
        elif e["cause"] == "unexplained":
            # a degraded replica and nothing else: only the healthy run removes it
            assert cf["no_fault"]["removed"] and not cf["neither"]["removed"]
            assert any(f.start_min * 60_000 + ts0 < end and f.end_min * 60_000 + ts0 > start for f in r.faults)
        # the truth's shares (Shapley over the counterfactual runs) add to 1, or are all zero
        assert sum(e["shares"].values()) == pytest.approx(1.0, abs=1e-3) or not any(e["shares"].values())
        if e["cause"] == "mixed":
            assert e["shares"]["batch_contention"] > 0 and e["shares"]["traffic_surge"] > 0
        if e["cause"] in ("batch_contention", "traffic_surge"):
            assert e["shares"][e["cause"]] >= 0.5
        if e["misattributable_by_dashboard"]:
            assert e["cause"] == "batch_contention"
    # events are exactly what the rule finds in the per-minute truth
    for s in r.scenario.services:
        found = detect_runs(r.p99_variants["full"][s.name], s.slo_p99_ms, r.scenario.min_event_min,
                            r.scenario.merge_gap_min)
        assert len(found) == sum(1 for e in t["events"] if e["service"] == s.name)
    # the counterfactual without anything has no batch- or surge-caused tails
    for s in r.scenario.services:
        full_runs = detect_runs(r.p99_variants["neither"][s.name], s.slo_p99_ms, 5, 10)
        assert sum(1 for e in t["events"] if e["service"] == s.name and e["cause"] == "scaling_lag") <= len(full_runs)


def test_scenarios_tell_their_stories(runs) -> None:
    causes = {name: Counter(e["cause"] for e in r.events) for name, r in runs.items()}
    morning = runs["morning"]
    assert causes["morning"]["batch_contention"] >= 5
    assert any(e["misattributable_by_dashboard"] for e in morning.events)
    assert causes["partitioned"]["batch_contention"] == 0 and causes["partitioned"]["traffic_surge"] >= 1
    assert causes["mixed"]["batch_contention"] >= 1 and causes["mixed"]["traffic_surge"] + causes["mixed"]["mixed"] >= 1
    assert not runs["real-traffic"].surges
    # compound: surges inside the 32-GPU hold make mixed mornings; degraded replicas unexplained nights
    assert causes["compound"]["mixed"] >= 1 and causes["compound"]["unexplained"] >= 1
    assert causes["compound"]["batch_contention"] >= 1 and not causes["morning"]["unexplained"]
    # partitioned: batch never holds a reserved GPU
    part = runs["partitioned"]
    reserved = list(part.topology.general)[: part.scenario.inference_reserved_gpus]
    held = part.full.pool.holders[:, reserved]
    kinds = {p.idx: p.klass for p in part.full.pool.pods}
    assert all(kinds[int(i)] == "inference" for i in np.unique(held) if i >= 0)


def test_morning_story_fine_tune_holds_gpus_at_the_ramp(runs) -> None:
    r = runs["morning"]
    t = truth(r)
    ft = [j for j in t["batch_jobs"] if j["workload"] == "nightly-finetune"]
    assert len(ft) >= 6
    for j in ft:
        assert j["start"][11:16] == "02:00"
        hours = (_iso_ms(j["end"]) - _iso_ms(j["start"])) / 3600_000
        assert 8.0 <= hours <= 9.0 and j["gpus"] >= 30
    # at 09:45 on fine-tune days chat wants more replicas than it has ready
    chat = r.full.pool
    short = 0
    for j in ft:
        m = (_iso_ms(j["start"][:10] + "T09:45:00Z") - r.start_ms) // 60_000
        short += int(chat.desired["chat-vllm"][m] > chat.ready["chat-vllm"][m])
    assert short >= len(ft) // 2
    # p99 on batch-contention events is a multiple of the same minutes without batch
    ev = [e for e in r.events if e["cause"] == "batch_contention" and e["service"] == "chat-vllm"]
    assert ev
    ratios = []
    for e in ev:
        a = (e["start_ms"] - r.start_ms) // 60_000
        b = (e["end_ms"] - r.start_ms) // 60_000
        ratios.append(np.nanmax(r.p99_variants["full"]["chat-vllm"][a:b]) /
                      np.nanmedian(r.p99_variants["no_batch"]["chat-vllm"][a:b]))
    assert np.median(ratios) >= 2.0


def test_weekly_and_daily_rhythm() -> None:
    r = simulate("morning", days=7, gpus=16, seed=1)
    req = r.full.requests["chat-vllm"].reshape(7, 1440)
    night = req[:5, 180:300].mean()
    day = req[:5, 660:900].mean()
    assert 0.08 < night / day < 0.25
    assert req[5:, 660:900].mean() < 0.8 * day  # quieter weekends
    ramp = req[:5, 535:575].mean(axis=0)
    assert ramp[-5:].mean() > 2 * ramp[:5].mean()  # the 09:00-09:30 ramp


def test_weekly_surges_repeat_the_first_weeks_and_the_default_is_unchanged() -> None:
    """A change's story with weekly surges: the weeks either side differ only by the policy."""
    from dataclasses import replace

    from analytics.sample.traffic import MIN_PER_DAY, plan_surges

    sc = SCENARIOS["morning"]
    weekly = plan_surges(replace(sc, surges=replace(sc.surges, weekly=True)), 14, np.random.default_rng(3))
    week = 7 * MIN_PER_DAY
    first = [s for s in weekly if s.start_min < week]
    assert first and len(weekly) == 2 * len(first)
    assert [(s.service, s.start_min + week, s.end_min + week, s.factor) for s in first] == \
        [(s.service, s.start_min, s.end_min, s.factor) for s in weekly if s.start_min >= week]
    # the default draws its days over the whole run, as before (the bundled sample is unchanged)
    plain = plan_surges(sc, 14, np.random.default_rng(3))
    assert len(plain) == round(sc.surges.days * 14 / 21)


def test_topology_counting_rules_exercised() -> None:
    topo = build_topology(64)
    roles = Counter(g.role for g in topo.gpus)
    assert roles == {"general": 61, "mig": 2, "timeslice": 1}
    with pytest.raises(ConfigError):
        build_topology(20)
    with pytest.raises(ConfigError):
        simulate("nope")


@pytest.fixture(scope="module")
def small():
    r = simulate("morning", days=1, gpus=16, seed=11)
    ss = build_series(r, minutes=slice(540, 570))
    return r, ss


def test_exposition_parses_with_prometheus_client(small) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    r, ss = small
    one = ss.samples.filter(pl.col("ts_ms") == ss.samples["ts_ms"].min())
    text = exposition_text(ss, one)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["vllm:time_to_first_token_seconds"].type == "histogram"
    assert fams["DCGM_FI_DEV_GPU_UTIL"].type == "gauge"
    les = [s.labels["le"] for s in fams["vllm:time_to_first_token_seconds"].samples
           if s.name.endswith("_bucket") and s.labels["pod"] == fams["vllm:time_to_first_token_seconds"].samples[0].labels["pod"]]
    assert les[:3] == ["0.001", "0.005", "0.01"] and les[-1] == "+Inf"
    n = sum(len(f.samples) for f in fams.values())
    assert n == one.height
    # MIG instances carry no GPU_UTIL; some have no pod labels; time-sliced pods share a value
    mig = [s for s in fams["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].samples if "GPU_I_PROFILE" in s.labels]
    assert mig and any("pod" not in s.labels for s in mig)
    assert not any("GPU_I_PROFILE" in s.labels for s in fams["DCGM_FI_DEV_GPU_UTIL"].samples)
    text_all = exposition_text(ss)
    assert text_all.count("# TYPE DCGM_FI_DEV_GPU_UTIL gauge") == 30  # one per scrape
    json_doc = json.loads(query_range_json(ss))
    assert json_doc["data"]["resultType"] == "matrix"
    assert sum(len(x["values"]) for x in json_doc["data"]["result"]) == ss.samples.height


def test_counters_cumulative_and_histograms_consistent(small) -> None:
    r, ss = small
    df = ss.samples.join(ss.series, on="skey")
    bucket = df.filter(pl.col("metric") == "vllm:time_to_first_token_seconds_bucket")
    # per series, cumulative over time
    bad = (bucket.sort(["skey", "ts_ms"]).group_by("skey")
           .agg((pl.col("value").diff().fill_null(0) < 0).sum().alias("neg")).filter(pl.col("neg") > 0))
    assert bad.height == 0
    count = df.filter(pl.col("metric") == "vllm:time_to_first_token_seconds_count")["value"].sum()
    inf = bucket.filter(pl.col("labels").str.contains('"le":"\\+Inf"'))["value"].sum()
    assert count == inf > 0


def _store_rows(st: Store) -> set[tuple]:
    rows = st.con.execute(
        "SELECT s.key, x.ts_ms, x.value FROM samples x JOIN series s ON s.id = x.series_id").fetchall()
    return set(rows)


@pytest.mark.parametrize("fmt", ["prom-text", "prom-json", "csv", "parquet"])
def test_load_into_equals_ingesting_the_exports(small, tmp_path: Path, fmt: str) -> None:
    from analytics import ingest
    r, ss = small
    write_exports(r, tmp_path, formats=(fmt,), series=ss)
    with Store(":memory:") as a, Store(":memory:") as b:
        res = load_into(a, r, series=ss)
        assert res.status == "loaded" and res.samples == ss.samples.height
        assert load_into(a, r, series=ss).status == "skipped"
        loaded = ingest.ingest_path(b, tmp_path / fmt)
        assert loaded and all(x.status == "loaded" for x in loaded), [x.error for x in loaded]
        assert _store_rows(a) == _store_rows(b)


def test_bundled_excerpts_regenerate_byte_identically(tmp_path: Path) -> None:
    from analytics.sample.export import write_excerpts

    bundled = DATA / "sample"
    files = sorted(p.name for p in bundled.iterdir())
    assert {"excerpt.prom.gz", "excerpt.json.gz", "excerpt.csv.gz", "excerpt.parquet", "truth.json"} <= set(files)
    # what data/ ships (the cache and stores there are git-ignored builds)
    shipped = [p for p in DATA.rglob("*") if p.is_file() and "cache" not in p.parts
               and not p.name.endswith((".duckdb", ".wal", ".tmp"))]
    assert sum(p.stat().st_size for p in shipped) <= 10 * 1024 * 1024
    paths = write_excerpts(simulate("morning", days=21, gpus=64, seed=7), tmp_path)
    assert sorted(p.name for p in paths) == files
    for p in paths:
        assert p.read_bytes() == (bundled / p.name).read_bytes(), p.name
    assert gzip.decompress((bundled / "excerpt.prom.gz").read_bytes()).startswith(b"# TYPE ")


def test_ensure_default_store_builds_once_and_caches(tmp_path: Path, monkeypatch) -> None:
    import analytics.sample as sample

    calls = []
    real = sample.simulate

    def small_run(scenario: str, *, days: int, gpus: int, seed: int):
        calls.append((scenario, days, gpus, seed))
        return real(scenario, days=1, gpus=16, seed=seed)

    monkeypatch.setattr(importlib.import_module("analytics.sample.sim"), "simulate", small_run)
    target = tmp_path / "cache" / "default.duckdb"
    assert sample.ensure_default_store(target) == target
    assert calls == [("morning", 21, 64, 7)]
    with Store(target, read_only=True) as st:
        assert st.totals()["samples"] > 0 and st.sources()["format"].to_list() == ["sample"]
    assert sample.ensure_default_store(target) == target
    assert len(calls) == 1  # cached
    assert [p.name for p in target.parent.iterdir()] == ["default.duckdb"]
    assert "sample-v" in sample.DEFAULT_CACHE_DIR.joinpath(f"sample-v{sample.SAMPLE_VERSION}").name


def test_cli_sample_writes_exports_and_truth(tmp_path: Path, capsys) -> None:
    from analytics.cli import main

    rc = main(["sample", "--scenario", "partitioned", "--days", "1", "--gpus", "16", "--seed", "2",
               "--out", str(tmp_path), "--formats", "prom-text", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenario"] == "partitioned"
    t = json.loads((tmp_path / "truth.json").read_text())
    assert t["scenario"] == "partitioned" and t["seed"] == 2
    assert (tmp_path / "prom-text" / "scrape-2026-10-05.prom.gz").exists()
    assert main(["sample", "--out", str(tmp_path), "--formats", "xml"]) == 2


def test_cli_sample_simulates_a_change_and_its_truth_says_so(tmp_path: Path, capsys) -> None:
    from analytics.cli import main

    rc = main(["sample", "--days", "2", "--gpus", "16", "--seed", "2", "--change-day", "1", "--change-policy",
               "tidal", "--change-weekly-surges", "--out", str(tmp_path), "--formats", "parquet", "--json"])
    assert rc == 0
    t = json.loads((tmp_path / "truth.json").read_text())["change"]
    assert (t["policy"], t["day"], t["weekly_surges"], t["tidal_window"]) == ("tidal", 1, True, [20.0, 8.0])
    assert set(t["minutes_over_slo"]) == {"before", "after"}
    assert main(["sample", "--days", "2", "--change-day", "2", "--out", str(tmp_path)]) == 2  # not inside the run


def test_latency_rises_with_load_per_replica() -> None:
    from analytics.sample.latency import Uniforms, draw_latency
    from analytics.sample.scenarios import CHAT, RECOMMENDER

    for svc, rps in ((CHAT, 40.0), (RECOMMENDER, 1500.0)):
        n = 8
        one = Uniforms.draw(np.random.default_rng(0), 1)
        # the same draws every minute: only the queue's state differs
        u = Uniforms(*(np.repeat(getattr(one, f), n, axis=0) for f in ("wait_u", "wait_e", "pos_u", "z1", "z2")))
        req = np.full(n, int(rps * 60))
        # fewer serving replicas for the same traffic: more load per replica
        serving = np.array([40, 30, 20, 16, 13, 11, 10, 9]) if svc is CHAT else np.array([20, 14, 10, 8, 7, 6, 5, 4])
        d = draw_latency(svc, req, serving, u)
        assert np.all(np.diff(d.rho) >= 0)
        assert np.all(np.diff(d.p99_ms) >= 0) and d.p99_ms[-1] > d.p99_ms[0]
        assert d.p99_ms[-1] > 2.0 * d.p99_ms[0]


def test_timelines_read_the_sample_as_simulated() -> None:
    from analytics import timeline
    r = simulate("morning", days=1, gpus=64, seed=7)
    with Store(":memory:") as st:
        load_into(st, r)
        sv = timeline.service_timeline(st)
        pt = timeline.pool_timeline(st)
    from analytics.sample.export import truth_p99

    tp = truth_p99(r).with_columns(
        pl.from_epoch("ts_ms", time_unit="ms").dt.replace_time_zone("UTC").dt.cast_time_unit("ms").alias("ts"))
    j = sv.join(tp, on=["ts", "service"], how="inner").filter(pl.col("ts_ms") > r.start_ms)
    assert j.height >= 2 * 1400
    assert np.allclose(j["rps"].to_numpy(), j["requests"].to_numpy() / 60.0)
    assert (j["desired_replicas"] == j["desired_replicas_right"]).all()
    both = j.drop_nulls(["p99_ms", "p99_ms_right"])
    ratio = both["p99_ms"].to_numpy() / both["p99_ms_right"].to_numpy()
    assert 0.7 < np.median(ratio) < 1.6  # bucket interpolation, within the bucket's width
    kinds = np.array([p.klass == "batch" for p in r.full.pool.pods])
    batch = np.array([kinds[row[row >= 0]].sum() for row in r.full.pool.holders])
    assert np.array_equal(pt.sort("ts")["gpus_batch"].to_numpy(), batch.astype(float))
    assert (pt["gpus_total"] == 64).all()


def test_exported_buckets_are_the_requests_the_truth_counts(small) -> None:
    # Summed over pods, each minute's bucket increments are the draws scaled to the minute's
    # requests, and the truth's p99 is above a bucket-bound SLO exactly when more than 1% of those
    # exported requests are above it: the histogram and the truth cannot disagree at a bound.
    from analytics import signals as sg
    from analytics.sample.latency import bucket_counts, request_weights, weighted_p99

    r, _ = small
    ss = build_series(r)
    df = ss.samples.join(ss.series, on="skey").filter(pl.col("metric") == f"{sg.HTTP_DURATION}_bucket")
    inc = (df.sort(["skey", "ts_ms"])
           .with_columns(pl.col("value").diff().fill_null(pl.col("value")).over("skey").alias("inc"),
                         pl.col("labels").str.json_path_match("$.le").alias("le"))
           .group_by("ts_ms", "le").agg(pl.col("inc").sum()))
    bounds = sg.HTTP_DURATION_BUCKETS_S
    lat = r.full.latency["recommender"]
    n_req = r.full.requests["recommender"]
    w = request_weights(n_req, lat.main_s.shape[1])
    assert np.array_equal(w.sum(axis=1), n_req)
    per_bucket = bucket_counts(lat.main_s, w, bounds)
    minute = ((inc["ts_ms"] - r.start_ms) // (r.scenario.scrape_s * 1000)).to_numpy()
    les = [repr(float(b)) for b in bounds] + ["+Inf"]
    got = np.zeros_like(per_bucket)
    for le, m, v in zip(inc["le"].to_list(), minute.tolist(), inc["inc"].to_list()):
        got[m, les.index(le)] = int(v)
    served = (r.full.pool.serving["recommender"] >= 0).any(axis=1)
    assert served.sum() > 1000
    assert np.array_equal(got[served], np.cumsum(per_bucket, axis=1)[served])
    p99 = weighted_p99(lat.main_s, w) * 1000.0
    assert np.allclose(p99, lat.p99_ms, equal_nan=True)
    for j, bound_s in enumerate(bounds):
        above = n_req - np.cumsum(per_bucket, axis=1)[:, j]
        assert np.array_equal((np.nan_to_num(p99) > bound_s * 1000.0)[n_req > 0],
                              (above > 0.01 * n_req)[n_req > 0])
    slo = next(s.slo_p99_ms for s in r.scenario.services if s.name == "recommender")
    assert any(np.isclose(b * 1000.0, slo) for b in bounds)


def test_the_package_truth_is_the_writer_whatever_was_imported_first() -> None:
    # `truth` is a submodule and the function the package exports; importing the submodule (or
    # the writers) before reading the name must not turn the package's `truth` into the module.
    import subprocess
    import sys

    code = ("import analytics.sample.truth, analytics.sample.export\n"
            "from analytics.sample import truth, SCENARIOS\n"
            "import analytics.sample as s\n"
            "assert callable(truth) and callable(s.truth), truth\n")
    subprocess.run([sys.executable, "-c", "import sys\n" + code], check=True, timeout=120)
    # Finding the sample's file does not load the simulator (scipy): the app's first run.
    lazy = subprocess.run([sys.executable, "-c", "import sys, analytics.sample\n"
                           "print('analytics.sample.sim' in sys.modules)"],
                          check=True, timeout=120, capture_output=True, text=True)
    assert lazy.stdout.strip() == "False"
