"""Issue 38's ingest bugs and DCGM's blank sentinels, through the loader the CLI uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.ingest import ingest_bytes, ingest_path
from analytics.ingest.formats import exposition_flavour
from analytics.store import TIME_WINDOW_ENV, Store

FIXTURES = Path(__file__).parent / "fixtures"
AT_MS = 1_780_000_000_000
# DCGM's "no data" values: int64 blank (2^63 as a double), int32 blanks, fp64 blanks
SENTINELS = (9223372036854775808, 2147483632, 2147483633, 2147483634, 2147483635,
             140737488355328, 140737488355329, 140737488355330, 140737488355331)


@pytest.mark.parametrize("line", ["a 1 1.1.1", "a 1 1e", "a{b=\"c\"} 1 --1", "a 1 1.1.1\n# EOF"])
def test_a_malformed_timestamp_is_refused_with_its_line_not_an_internal_error(tmp_path, line: str) -> None:
    exposition_flavour(line.encode())  # raised ValueError on '1.1.1' before
    path = tmp_path / "bad.prom"
    path.write_text(line + "\n")
    with Store(":memory:") as store:
        [result] = ingest_path(store, path, at_ms=AT_MS)
    assert result.status == "failed"
    assert result.error.startswith(f"{path}:1: ") and "internal error" not in result.error


def test_lines_before_eof_on_the_slow_path_are_not_counted_after_it() -> None:
    path = FIXTURES / "prometheus" / "alltypes.5mfs.om.txt"  # Prometheus' own test file, exemplars on line 19..
    text = path.read_text()
    samples = sum(1 for ln in text.splitlines() if ln and not ln.startswith("#"))
    with Store(":memory:") as store:
        [result] = ingest_path(store, path, at_ms=AT_MS)
    assert result.status == "loaded" and result.samples == samples
    assert "after the # EOF" not in (result.note or "")
    # ...though lines truly after it still are
    with Store(":memory:") as store:
        again = ingest_bytes(store, "x.om", text.encode() + b"go_build_info 2 1780000001\n", at_ms=AT_MS)
    assert "1 line(s) after the # EOF at line 64" in again.note and "first at line 65" in again.note


@pytest.mark.parametrize("vectorised", [True, False])
def test_sub_millisecond_timestamps_are_reported_as_what_they_are(vectorised: bool) -> None:
    from analytics.ingest.exposition import parse_exposition
    from analytics.store import Sink

    text = (b"# TYPE a gauge\n" + b"".join(f'a{{g="{g}"}} {v} 1780000000.000{v}\n'.encode()
                                            for g in range(2) for v in (1, 2)) + b"# EOF\n")
    with Store(":memory:") as store:
        parser = parse_exposition([text], Sink(store.con, "x.om"), "x.om", openmetrics=True,
                                  default_ts_ms=AT_MS, vectorised=vectorised)
    [note] = parser.notes()
    assert note.startswith("4 sample(s) timestamped finer than a millisecond") and note.endswith("first at line 2")
    with Store(":memory:") as store:
        result = ingest_bytes(store, "x.om", text)
    assert result.samples == 2 and result.duplicates == 2 and "finer than a millisecond" in result.note


def _scrape(metric: str, labels: str) -> bytes:
    return "".join(f'{metric}{{{labels},i="{i}"}} {v}\n' for i, v in enumerate(SENTINELS)).encode()


def test_dcgm_blanks_are_dropped_for_dcgm_fields_only(monkeypatch) -> None:
    text = (_scrape("vllm:request_success_total", 'model_name="m",finished_reason="stop"')
            + _scrape("node_network_receive_bytes_total", 'device="eth0"')
            + _scrape("DCGM_FI_DEV_GPU_UTIL", 'gpu="0",UUID="GPU-1"')
            + _scrape("dcgm_fi_dev_fb_used", 'gpu="0",UUID="GPU-1"'))
    with Store(":memory:") as store:
        result = ingest_bytes(store, "mixed.prom", text, at_ms=AT_MS)
        assert (result.samples, result.blanks) == (2 * len(SENTINELS), 2 * len(SENTINELS))
        for metric in ("vllm:request_success_total", "node_network_receive_bytes_total"):
            kept = store.query("SELECT x.value FROM samples x JOIN series s ON s.id = x.series_id "
                               "WHERE s.metric = $m ORDER BY x.value", {"m": metric})["value"].to_list()
            assert kept == [float(v) for v in sorted(SENTINELS)]
    # OpenMetrics' own uint64_counter case: a_total 9223372036854775808 is a value, not a blank
    monkeypatch.setenv(TIME_WINDOW_ENV, "1970-01-01,now+1d")
    with Store(":memory:") as store:
        [result] = ingest_path(store, FIXTURES / "openmetrics" / "parsers" / "uint64_counter" / "metrics", at_ms=AT_MS)
        assert (result.samples, result.blanks) == (1, 0)


def test_scrapes_concatenated_inside_one_document_load_with_a_note_and_a_long_one_is_judged_in_part() -> None:
    from analytics.ingest.om_check import HISTOGRAM_DEFECT, MAX_CHECK_LINES

    # every series at t1, then every series at t2, one # EOF: the family's series interleave
    rows = [f'u{{g="{g}"}} {g} {1780000000 + 15 * t}' for t in range(2) for g in range(3)]
    text = "# TYPE u gauge\n" + "\n".join(rows) + "\n# EOF\n"
    with Store(":memory:") as store:
        result = ingest_bytes(store, "x.om", text.encode())
    assert result.samples == 6 and "Invalid metric grouping" in result.note and "loaded as written" in result.note
    # one family longer than the part judged: cut inside it, its unseen end is not called a defect
    n = MAX_CHECK_LINES * 2
    big = "# TYPE h histogram\n" + "".join(f'h_count{{x="{i}"}} 1 1780000000\nh_bucket{{x="{i}",le="+Inf"}} 1 '
                                           f'1780000000\nh_sum{{x="{i}"}} 1 1780000000\n' for i in range(n // 3))
    with Store(":memory:") as store:
        result = ingest_bytes(store, "big.om", (big + "# EOF\n").encode())
    assert result.samples == 3 * (n // 3) and HISTOGRAM_DEFECT not in (result.note or "")
