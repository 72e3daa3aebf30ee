"""Pulled timelines equal the timelines built from the same data loaded from files."""

from __future__ import annotations

import polars as pl
import pytest

import live_data as d
import prom_server
from analytics.ingest import ingest_bytes
from analytics.live.client import ClientConfig, PromClient
from analytics.live.pull import pull
from analytics.store import Store
from analytics.timeline import TimelineConfig, pool_timeline, service_timeline
from plugins.prometheus import prometheus  # noqa: F401  (the session fixture)

pytestmark = [pytest.mark.prometheus, pytest.mark.xdist_group("prometheus")]

# Steps after the first: a file's first step has no previous sample for counters, a pull's does not
# need one; both agree from the second step on.
CFG = TimelineConfig(step_s=d.SCRAPE_S, start_ms=d.T0_MS + d.STEP_MS, end_ms=d.END_MS)


@pytest.fixture(scope="module")
def stores(prometheus, tmp_path_factory):
    url, samples = prometheus
    om = prom_server.write_openmetrics(samples, tmp_path_factory.mktemp("om") / "fleet.om")
    files, pulled = Store(":memory:"), Store(":memory:")
    try:
        ingest_bytes(files, "fleet.om", om.read_bytes())
        with PromClient(url, config=ClientConfig(max_points=50), sleep=lambda s: None) as client:
            # Two pulls: the second continues the first (incremental, running sums carried on).
            pull(pulled, client, d.T0_MS, d.T0_MS + 64 * d.STEP_MS, step_ms=d.STEP_MS)
            pull(pulled, client, d.T0_MS, d.END_MS, step_ms=d.STEP_MS)
        yield files, pulled
    finally:
        files.close()
        pulled.close()


def _same(a: pl.DataFrame, b: pl.DataFrame, keys: list[str]) -> None:
    a, b = a.sort(keys), b.sort(keys)
    assert a.height == b.height > 0
    assert a.columns == b.columns
    for col in a.columns:
        if a[col].dtype.is_float():
            assert a[col].to_list() == pytest.approx(b[col].to_list(), nan_ok=True), col
        else:
            assert a[col].to_list() == b[col].to_list(), col


def test_whatif_timeline_from_a_pull_equals_the_files(stores):
    files, pulled = stores
    want, got = pool_timeline(files, CFG), pool_timeline(pulled, CFG)
    _same(want, got, ["ts", "pool"])
    assert want["gpus_total"].max() > 0


def test_service_timeline_from_a_pull_equals_the_files(stores):
    files, pulled = stores
    want, got = service_timeline(files, CFG), service_timeline(pulled, CFG)
    _same(want, got, ["service", "ts"])
    assert want["p99_ms"].drop_nulls().n_unique() > 10 and want["replicas"].max() == 2


def test_pull_holds_fewer_series_than_the_files(stores):
    files, pulled = stores
    assert pulled.totals()["series"] < files.totals()["series"]
