"""One parser for a typed time, one rule for a bare number (epoch seconds), at every door.

"1767225600" was 2026-01-01 for ``ingest --at`` and ``pull --from``, 1970-01-21 in the Data
page's Files tab and refused by ``events --from`` and the store's time window. Each door is
driven here with the same texts; a test reads the library's and the pages' source and fails
when a typed time is parsed anywhere but :func:`analytics.times.parse_time_ms` (and its
:func:`~analytics.times.parse_iso`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analytics.cli import main
from analytics.errors import ConfigError
from analytics.times import parse_time_ms

ROOT = Path(__file__).resolve().parent.parent
NEW_YEAR_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize("text", ["1767225600", "1767225600.0", " 2026-01-01T00:00:00Z ",
                                  "2026-01-01T00:00:00", "2026-01-01T01:00:00+01:00", "2026-01-01"])
def test_one_instant_however_it_is_written(text: str) -> None:
    assert parse_time_ms(text) == NEW_YEAR_MS


@pytest.mark.parametrize("text,said", [
    ("1767225600000", "milliseconds? divide by 1000"),
    ("nan", "no time in seconds"),
    ("next tuesday", "write ISO-8601"),
    ("2026-13-01", "write ISO-8601"),
])
def test_a_time_it_cannot_read_says_what_to_write(text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(said)) as err:
        parse_time_ms(text, what="--from")
    assert str(err.value).startswith("--from ")


def test_every_door_reads_a_bare_number_as_epoch_seconds(tmp_path, monkeypatch, capsys) -> None:
    from analytics.store import TIME_WINDOW_ENV, Store, plausible_window_ms
    from analytics.view import parse_query_params

    # the CLI's --at: an untimestamped scrape lands at that second
    scrape = tmp_path / "scrape.prom"
    scrape.write_text('# TYPE up gauge\nup{job="a"} 1\n')
    db = tmp_path / "t.duckdb"
    assert main(["ingest", "--db", str(db), str(scrape), "--at", "1767225600", "--json"]) == 0
    capsys.readouterr()
    with Store(db, read_only=True) as st:
        assert st.totals()["first_ts_ms"] == NEW_YEAR_MS
    # events --from / --to (and review's, which share them): read, not refused (the store has no
    # latency, which is what it then says)
    main(["events", "--db", str(db), "--from", "1767225600", "--to", "1767229200", "--json"])
    err = capsys.readouterr().err
    assert "service timeline is empty" in err and "--from" not in err
    assert main(["events", "--db", str(db), "--from", "1767225600000"]) == 2
    assert "--from '1767225600000': a bare number is epoch seconds" in capsys.readouterr().err
    # a link's range (the pages' start/end)
    v, problems = parse_query_params({"start": "1767225600", "end": "2026-01-02T00:00Z"})
    assert (v.start_ms, v.end_ms, problems) == (NEW_YEAR_MS, NEW_YEAR_MS + 86_400_000, [])
    # the store's plausible-time window
    monkeypatch.setenv(TIME_WINDOW_ENV, "1767225600,now+1d")
    assert plausible_window_ms(now_ms=NEW_YEAR_MS)[0] == NEW_YEAR_MS


# Columns of a data file are read by its reader, vectorised (polars' to_datetime over a whole
# column with the file's format); what this rule covers is a single time someone typed or a
# setting holds.
SCALAR_TIME_PARSE = re.compile(r"\bfromisoformat\(|\bstrptime\(|pl\.Series\(\[[^\]]*\]\)\.str\.to_datetime")


def test_no_time_is_parsed_outside_its_definition() -> None:
    found = []
    for folder in ("analytics", "pages"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "analytics" / "times.py":
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if SCALAR_TIME_PARSE.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "parse typed times with analytics.times.parse_time_ms:\n" + "\n".join(found)
