"""View settings: the URL round trip a shared link depends on, and tolerance of bad links."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, strategies as st

import analytics.view as view
from analytics.view import ViewSettings, parse_query_params


def test_doctests() -> None:
    assert doctest.testmod(view).failed == 0


def _settings(params):
    return parse_query_params(params)[0]


def test_defaults_make_a_clean_url() -> None:
    assert ViewSettings().to_query_params() == {}
    assert _settings({}) == ViewSettings()


def test_full_round_trip() -> None:
    v = ViewSettings(source="duckdb", db_path="/tmp/x.duckdb", start_ms=1_764_288_000_000,
                     end_ms=1_764_374_400_000, step_s=900,
                     slo_ms={"*": 120.0, "chat-vllm": 500.0}, tz="Europe/Berlin")
    params = v.to_query_params()
    assert params == {"source": "duckdb", "db": "/tmp/x.duckdb", "start": "2025-11-28T00:00:00Z",
                      "end": "2025-11-29T00:00:00Z", "step": "900", "slo": "120,chat-vllm:500",
                      "tz": "Europe/Berlin"}
    assert _settings(params) == v
    assert hash(_settings(params)) == hash(v)


def test_streamlit_lists_take_the_last_value() -> None:
    v = _settings({"step": ["60", "300"]})
    assert v.step_s == 300


def test_a_links_step_meets_the_one_step_rule() -> None:
    """A link's ?step= is read by the CLI's rule (1 s to 1 d): past a day it is refused in words
    (99,999,999,999 s built no timeline), a day itself and the CLI's spellings are read."""
    for bad in ("99999999999", "86401", "0", "1.5", "2d"):
        v, problems = parse_query_params({"step": bad})
        said = f"step={bad!r} ignored: the step is whole seconds from 1 s to 1 d (86,400 s), e.g. 300"
        assert v.step_s == 60 and problems == [said], problems
    assert [parse_query_params({"step": ok})[0].step_s for ok in ("86400", "1", "5m", "1h")] == [86400, 1, 300, 3600]


@pytest.mark.parametrize("key,value", [("step", "abc"), ("step", "-5"), ("source", "s3"),
                                       ("tz", "Mars/Olympus"), ("start", "yesterday"),
                                       ("slo", "fast"), ("slo", "chat:-1")])
def test_bad_values_fall_back_with_a_message(key: str, value: str) -> None:
    v, problems = parse_query_params({key: value, "step": value if key == "step" else "300"})
    assert len(problems) == 1 and problems[0].startswith(f"{key}=")
    assert v.step_s == (60 if key == "step" else 300)


def test_reversed_range_is_dropped() -> None:
    v, problems = parse_query_params({"start": "2025-11-29T00:00Z", "end": "2025-11-28T00:00Z"})
    assert (v.start_ms, v.end_ms) == (None, None) and problems


def test_slo_lookup_per_service() -> None:
    v = ViewSettings(slo_ms={"*": 100.0, "chat-vllm": 500.0})
    assert v.slos.ms("chat-vllm") == 500.0
    assert v.slos.ms("recommender") == 100.0
    assert ViewSettings(slo_ms={"chat-vllm": 500.0}).slos.ms("other") == view.DEFAULT_SLO_MS


def test_clamp_range_to_data() -> None:
    assert ViewSettings().clamp_range(10, 20) == (10, 20)
    assert ViewSettings(start_ms=15).clamp_range(10, 20) == (15, 20)
    assert ViewSettings(start_ms=30, end_ms=40).clamp_range(10, 20) == (10, 20)


def test_every_field_has_help() -> None:
    for name in ("source", "db_path", "start_ms", "end_ms", "step_s", "slo_ms", "tz"):
        assert len(view.help_of(name)) > 10


def test_uploads_db_follows_env(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(view.UPLOADS_DB_ENV, str(tmp_path / "u.duckdb"))
    # The operator's uploads store is not confined to the data folder: a visitor cannot set it.
    elsewhere = tmp_path / "folder"
    elsewhere.mkdir()
    assert ViewSettings(source="uploads").db_file(elsewhere) == tmp_path / "u.duckdb"
    assert ViewSettings(source="sample").db_file(elsewhere) is None


@given(source=st.sampled_from(list(view.SOURCE_KINDS)),
       start=st.one_of(st.none(), st.integers(0, 2_000_000_000_000)),
       span=st.integers(1, 10**10),
       step=st.integers(1, 86_400),
       slo=st.dictionaries(st.sampled_from(["*", "chat-vllm", "recommender", "a:b"]),
                           st.floats(0.001, 1e6, allow_nan=False), min_size=1),
       tz=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]))
def test_round_trip_property(source, start, span, step, slo, tz) -> None:
    v = ViewSettings(source=source, db_path="/d b/x.duckdb" if source == "duckdb" else None,
                     start_ms=start, end_ms=None if start is None else start + span,
                     step_s=step, slo_ms=slo, tz=tz)
    back, problems = parse_query_params(v.to_query_params())
    assert problems == []
    assert back.source == v.source and back.step_s == v.step_s and back.tz == v.tz
    assert (back.start_ms, back.end_ms) == (v.start_ms, v.end_ms)
    assert back.slo_ms == pytest.approx(v.slo_ms, rel=1e-5)


def test_workload_edits_become_rules_that_survive_the_file(tmp_path) -> None:
    from analytics.workloads import WorkloadMap, classify, load_map, save_map

    labels = {"namespace": "ml-training", "pod": "nightly-finetune-0"}
    assert classify(WorkloadMap(), labels).cls == "batch"
    edit = {"namespace": "ml-training", "workload": "nightly-finetune", "cls": "other", "team": "rnd"}
    wmap = view.apply_workload_edits(WorkloadMap(), [edit])
    d = classify(wmap, labels)
    assert (d.cls, d.team, d.rule) == ("other", "rnd", "app: ml-training/nightly-finetune")
    path = tmp_path / "tidelens.toml"
    save_map(wmap, path)
    again = view.apply_workload_edits(load_map(path), [{**edit, "cls": "inference"}])
    assert len(again.rules) == 1  # replaced, not stacked
    assert classify(again, labels).cls == "inference"
    # Another workload in the same namespace keeps the defaults.
    assert classify(again, {"namespace": "ml-training", "pod": "train-llm-0"}).cls == "batch"


def test_the_summary_shows_the_year_only_when_the_range_crosses_one() -> None:
    v = ViewSettings(start_ms=1_564_308_000_000, end_ms=1_764_626_400_000)  # 2019 -> 2025
    assert v.describe().startswith("Jul 28 2019 10:00 → Dec 1 2025 22:00 UTC")
    same = ViewSettings(start_ms=1_764_000_000_000, end_ms=1_764_626_400_000)
    assert "2025" not in same.describe()
