"""NaN and infinite values are never stored silently (issue 50, 7): whichever door they come by (an
exposition file, a mapped table such as a pod duty-cycle table, an upload; a live pull and the rules'
recorded series in ``tests/test_live_pull.py``), the load's note counts them and names the first."""

from __future__ import annotations

import math

from analytics.ingest import ingest_bytes
from analytics.ingest.mapping import load_mapping

T_S = 1_767_571_200
# the pod duty-cycle table of docs/loading.md, each pod its own GPU
MAPPING = """time = {column = "timestamp_anon"}
values = {columns = ["duty_cycle"]}
metric = {name = "duty_cycle"}
labels = {container_ip = "pod"}
signals = {duty_cycle = {metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", scale = 0.01}}
device = {per = "pod"}
"""


def _values(store) -> list[float]:
    return [r[0] for r in store.query("SELECT value FROM samples ORDER BY ts_ms, series_id").rows()]


def test_a_gauge_nan_in_an_exposition_file_is_stored_and_noted(store) -> None:
    text = (f"# TYPE temp gauge\ntemp{{gpu=\"0\"}} 41 {T_S * 1000}\ntemp{{gpu=\"0\"}} NaN {T_S * 1000 + 60_000}\n"
            f"temp{{gpu=\"0\"}} +Inf {T_S * 1000 + 120_000}\n")
    r = ingest_bytes(store, "scrape.prom", text.encode())
    assert r.status == "loaded" and r.samples == 3
    assert "2 NaN/Inf value(s) stored as the source gave them, first at line 3" in r.note, r.note
    v = _values(store)
    assert v[0] == 41 and math.isnan(v[1]) and v[2] == math.inf  # as given: Prometheus allows them
    finite = ingest_bytes(store, "ok.prom", f"up 1 {T_S * 1000}\n".encode())
    assert finite.status == "loaded" and "NaN" not in (finite.note or "")


def test_a_pod_duty_cycle_table_with_nan_and_inf_says_so(store, tmp_path) -> None:
    p = tmp_path / "duty.toml"
    p.write_text(MAPPING)
    rows = [f"{T_S + 60 * i},10.0.0.{i},{v}" for i, v in enumerate(["40", "nan", "55", "inf", "-inf"])]
    table = ("timestamp_anon,container_ip,duty_cycle\n" + "\n".join(rows) + "\n").encode()
    r = ingest_bytes(store, "duty.csv", table, columns=load_mapping(p))
    assert r.status == "loaded" and "3 NaN/Inf value(s) stored as the source gave them, first at line 3" in r.note, r

