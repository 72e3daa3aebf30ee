"""``tidelens events`` and ``tidelens report`` on a store built from the project's simulator."""

from __future__ import annotations

import json

import pytest

from analytics.cli import main
from analytics.store import Store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory, simulated_store):
    path, tr = simulated_store("morning", days=3, gpus=64, seed=4)  # the session's one build
    cfg = tmp_path_factory.mktemp("events") / "tidelens.toml"
    slos = {k: v["p99_ms"] for k, v in tr["slos"].items()}
    cfg.write_text("[slo]\n" + "".join(f'"{k}" = {v}\n' for k, v in slos.items()))
    return path, cfg, tr


def _events(capsys, *args: str) -> list[dict]:
    assert main(["events", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_events_json_contract(sample_db, capsys):
    db, cfg, tr = sample_db
    evs = _events(capsys, "--db", str(db), "--config", str(cfg))
    assert evs, "the morning scenario has tail events"
    for e in evs:
        assert list(e) == ["id", "service", "start", "end", "peak_p99_ms", "cause", "shares", "misattributed",
                           "evidence", "map_digest"]  # the workload map the events were computed with
        assert e["cause"] in ("batch_contention", "traffic_surge", "scaling_lag", "mixed", "unexplained")
        assert set(e["shares"]) == {"batch_contention", "traffic_surge", "unexplained"}
        assert e["start"].endswith("Z") and e["start"] < e["end"]
        assert e["peak_p99_ms"] > e["evidence"]["slo_ms"]
    assert any(e["cause"] == "batch_contention" for e in evs)
    # Same data, same settings: the same ids; other settings: other ids.
    again = _events(capsys, "--db", str(db), "--config", str(cfg))
    assert [e["id"] for e in again] == [e["id"] for e in evs]
    other = _events(capsys, "--db", str(db), "--config", str(cfg), "--min-duration-min", "6")
    assert not {e["id"] for e in other} & {e["id"] for e in evs}


def test_events_slo_flag_and_incidents(sample_db, capsys, tmp_path):
    db, cfg, _ = sample_db
    evs = _events(capsys, "--db", str(db), "--config", str(cfg))
    target = next(e for e in evs if e["cause"] == "batch_contention")
    inc = tmp_path / "incidents.csv"
    inc.write_text("start,end,service,recorded_cause,ticket\n"
                   f"{target['start']},{target['end']},{target['service']},user behaviour (noisy morning),INC-42\n")
    with_inc = _events(capsys, "--db", str(db), "--config", str(cfg), "--incidents", str(inc))
    hit = next(e for e in with_inc if e["id"] == target["id"])
    assert hit["misattributed"] is True
    assert hit["evidence"]["incident"]["recorded_cause"] == "user behaviour (noisy morning)"
    assert hit["evidence"]["incident"]["extra"] == {"ticket": "INC-42"}
    # The largest SLO (a day) leaves nothing to find.
    assert _events(capsys, "--db", str(db), "--config", str(cfg), "--slo-ms", "8.64e7") == []


def test_one_services_slo_on_the_command_line(sample_db, capsys):
    """``--slo SERVICE=MS`` (repeatable) sets one service's SLO over the file and --slo-ms: the
    other service keeps its own, and a malformed item says what to write."""
    db, cfg, _ = sample_db
    evs = _events(capsys, "--db", str(db), "--config", str(cfg))
    services = sorted({e["service"] for e in evs})
    assert len(services) == 2
    quiet, other = services
    only = _events(capsys, "--db", str(db), "--config", str(cfg), "--slo", f"{quiet}=8.64e7")
    assert {e["service"] for e in only} == {other}
    assert [e["id"] for e in only] == [e["id"] for e in evs if e["service"] == other]
    # over --slo-ms: every service at a day (the largest SLO) but the one named
    named = _events(capsys, "--db", str(db), "--config", str(cfg), "--slo-ms", "8.64e7", "--slo",
                    f"{other}={next(e for e in evs if e['service'] == other)['evidence']['slo_ms']}")
    assert {e["service"] for e in named} == {other}
    assert main(["events", "--db", str(db), "--slo", "chat-vllm"]) == 2
    assert "--slo 'chat-vllm': write SERVICE=MILLISECONDS" in capsys.readouterr().err


def test_events_table_and_report(sample_db, capsys, tmp_path):
    db, cfg, _ = sample_db
    assert main(["events", "--db", str(db), "--config", str(cfg)]) == 0
    table = capsys.readouterr().out
    assert "batch_contention" in table and "misattributed" in table
    # the sample's SLOs are bucket bounds (chat 1 s, recommender 100 ms): checked exactly, no note
    assert "recommender: SLO" not in table and "chat-vllm: SLO" not in table
    # an SLO inside a bucket gets the note (its check is interpolated)
    inside = tmp_path / "inside.toml"
    inside.write_text('[slo]\n"chat-vllm" = 1000.0\n"recommender" = 120.0\n')
    assert main(["events", "--db", str(db), "--config", str(inside)]) == 0
    assert "recommender: SLO 120 ms lies inside the (100, 150] ms bucket" in capsys.readouterr().out
    ev_id = _events(capsys, "--db", str(db), "--config", str(cfg))[0]["id"]
    out = tmp_path / "pm.html"
    assert main(["report", "--db", str(db), "--config", str(cfg), "--event", ev_id, "--out", str(out)]) == 0
    assert out.exists() and ev_id in out.read_text(encoding="utf-8")
    assert main(["report", "--db", str(db), "--config", str(cfg), "--event", "ev-nope", "--out", str(out)]) == 2
    assert "--event 'ev-nope' is not an event id" in capsys.readouterr().err


def test_report_of_no_such_event_is_refused_before_the_attribution(sample_db, capsys, tmp_path, monkeypatch):
    """An id these settings do not find is refused by detection alone: the norm band, the latency
    model and the attribution (half the time of `tidelens report` on the bundled sample, after the
    timelines) never run. Detection alone finds exactly the ids the analysis gives."""
    from analytics.cli import events_cmd
    from analytics.events import EventsConfig
    from analytics.events.pipeline import analyse_timelines, timelines_event_ids
    from analytics.slo import resolve_slos
    from analytics.timeline import store_timelines
    from analytics.workloads import load_map

    db, cfg, _ = sample_db
    with Store(db, read_only=True) as st:
        slos = resolve_slos(st, config=cfg)
        tl = store_timelines(st, EventsConfig().timeline_config(), load_map(cfg))
    found = timelines_event_ids(tl, EventsConfig(), slos=slos)
    assert found and found == {e.id for e in analyse_timelines(tl, EventsConfig(), slos=slos).events}

    def attributed(*_args, **_kwargs):
        raise AssertionError("the attribution ran for an event that is not there")

    monkeypatch.setattr(events_cmd, "analyse_timelines", attributed)
    out = tmp_path / "pm.html"
    assert main(["report", "--db", str(db), "--config", str(cfg), "--event", "ev-000000000000",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--event ev-000000000000: no such event with these settings" in err
    assert sorted(found)[0] in err and not out.exists()


def test_bad_incident_file_names_the_line(sample_db, capsys, tmp_path):
    db, cfg, _ = sample_db
    inc = tmp_path / "bad.csv"
    inc.write_text("start,end,service,recorded_cause\n2026-01-01T00:00:00Z,yesterday,chat,users\n")
    assert main(["events", "--db", str(db), "--config", str(cfg), "--incidents", str(inc)]) == 2
    err = capsys.readouterr().err
    assert "bad.csv:2" in err and "yesterday" in err


def test_timelines_cached_per_store_file_until_a_new_load(sample_db, tmp_path):
    import shutil

    from analytics.events import EventsConfig
    from analytics.timeline import store_timelines

    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db[0], db)
    cfg = EventsConfig()
    with Store(db) as st:
        first = store_timelines(st, cfg.timeline_config())
        assert store_timelines(st, cfg.timeline_config()).services is first.services  # second ask: no rebuild
        assert store_timelines(st, EventsConfig(step_s=120).timeline_config()).services is not first.services
        st.load("empty.prom", "prom-text", "sha256:empty-test-source", lambda sink: None)
        again = store_timelines(st, cfg.timeline_config())
    assert again.services is not first.services  # a new source invalidates the cache
    assert again.services.equals(first.services)  # (it added nothing, so the same frames)
    with Store(":memory:") as mem:
        assert store_timelines(mem, cfg.timeline_config()).services is not store_timelines(mem, cfg.timeline_config()).services
