"""``tidelens ingest``: files and folders, --json, --at, one stderr line per failing file."""

from __future__ import annotations

import gzip
import shutil

import orjson

from analytics.cli import main
from analytics.store import Store


def test_folder_with_good_and_bad_files(tmp_path, fixtures, capsys):
    src = tmp_path / "exports"
    (src / "sub").mkdir(parents=True)
    shutil.copy(fixtures / "datadog_dcgm_t4_scrape.prom", src / "scrape.prom")
    (src / "sub" / "up.json.gz").write_bytes(gzip.compress(
        (fixtures / "prom_query_range_up_201907281200.json").read_bytes()))
    (src / "sub" / "broken.prom").write_text('up{job="a"} 1 1000\nup{job="a"} x 2000\n')
    db = tmp_path / "t.duckdb"
    rc = main(["ingest", "--db", str(db), str(src), "--json", "--at", "2026-01-01T00:00:00Z"])
    captured = capsys.readouterr()
    out = orjson.loads(captured.out)
    assert rc == 1
    # One line on stderr for the failing file, naming it and its line.
    assert [ln for ln in captured.err.splitlines() if "broken.prom" in ln][0].count("broken.prom:2:") == 1
    by_name = {s["name"].rsplit("/", 1)[-1]: s for s in out["sources"]}
    assert by_name["scrape.prom"]["status"] == "loaded"
    assert by_name["scrape.prom"]["note"] == "timestamps from --at 2026-01-01T00:00:00Z"
    assert by_name["up.json.gz"]["format"] == "prom-json" and by_name["up.json.gz"]["samples"] == 6839
    assert by_name["broken.prom"]["status"] == "failed"
    assert (out["series"], out["samples"]) == (23 + 9, 23 + 6839)
    with Store(db) as st:
        assert st.totals()["samples"] == 23 + 6839


def test_error_lines_on_stderr_and_skips(tmp_path, fixtures, capsys):
    bad = tmp_path / "bad.prom"
    bad.write_text('# TYPE up gauge\nup{job="a"} 1 1000\nup{job="a" 2 2000\n')
    good = tmp_path / "good.prom"
    shutil.copy(fixtures / "datadog_dcgm_t4_scrape.prom", good)
    db = str(tmp_path / "t.duckdb")
    rc = main(["ingest", "--db", db, str(bad), str(good)])
    cap = capsys.readouterr()
    assert rc == 1
    assert cap.err.strip().splitlines() == [f"tidelens: {bad}:3: labels not closed with '}}': 'up{{job=\"a\" 2 2000'"]
    assert "loaded" in cap.out and "timestamps from file mtime" in cap.out
    rc = main(["ingest", "--db", db, str(good)])
    cap = capsys.readouterr()
    assert rc == 0 and cap.out.startswith("skipped")


def test_missing_path_and_bad_at(tmp_path, capsys):
    db = str(tmp_path / "t.duckdb")
    assert main(["ingest", "--db", db, str(tmp_path / "nope.prom")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["ingest", "--db", db, "--at", "tuesday", str(tmp_path)]) == 2
    assert "--at 'tuesday'" in capsys.readouterr().err


def test_a_folder_skips_docs_and_says_each_failure_reason_once(tmp_path, capsys):
    """A README, a LICENSE and an image beside the exports are skipped, not failed; failures that
    share a reason are summed up once, with their files."""
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "README.md").write_text("# what this is\n")
    (folder / "LICENSE").write_text("MIT\n")
    (folder / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (folder / "scrape.txt").write_text("up 1 1780000000000\n")  # .txt can be Prometheus text
    for i in range(4):
        (folder / f"trace-{i}.csv").write_text(f"0,{i},3.9,Gamma\n1,2,3,Gamma\n")
    db = tmp_path / "s.duckdb"
    assert main(["ingest", "--db", str(db), str(folder)]) == 1
    out, err = capsys.readouterr()
    assert "1 loaded, 3 skipped, 4 failed" in out
    assert "not a data file (documentation)" in out and "not a data file (an image)" in out
    assert "4 failed for 1 shared reason(s):" in err and "4 x a CSV whose header names no known layout" in err
    # each reason once, with its files, instead of a line per file (29 lines, then the summary)
    assert err.count("trace-0.csv") == 1 and len(err.splitlines()) == 3
