"""Writers of a simulated run: exposition-format scrape archives, ``query_range`` JSON, CSV and
Parquet (long), ``truth.json`` and ``truth_p99.parquet``; and the store fast path.

Every format is written from the same :class:`~analytics.sample.series.SeriesSet`, values in
their shortest round-trip decimal form, so ingesting any of them yields the same samples as
:func:`load_into`. Gzip members carry ``mtime=0`` and no file name: regeneration is
byte-identical.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import orjson
import polars as pl

from analytics import signals as sg
from analytics.measures import gpu_hours, minutes_over_slo
from analytics.sample import series as se
from analytics.sample.cluster import ServiceConfig
from analytics.sample.result import SimResult
from analytics.sample.seriesset import SeriesSet, family_type
from analytics.sample.traffic import MIN_PER_DAY
from analytics.sample.variants import export_scrape_s, zone_name
from analytics.sample.version import SAMPLE_VERSION
from analytics.slo import write_store_slos
from analytics.sql import sample as q
from analytics.sql import store as sq
from analytics.store import LoadResult, Store
from analytics.times import iso_utc as iso

FORMATS = ("prom-text", "prom-json", "csv", "parquet")
_CHUNK = 4_000_000


def truth(result: SimResult) -> dict[str, Any]:
    """What ``truth.json`` holds: scenario, SLOs, batch jobs, surges and tail events with causes."""
    sc = result.scenario
    step = sc.scrape_s * 1000
    ts0 = result.start_ms
    slos = {s.name: {"metric": _slo_metric(s), "p99_ms": s.slo_p99_ms} for s in sc.services}
    jobs = [{"id": j["id"], "workload": j["workload"], "namespace": j["namespace"], "team": j["team"],
             "gpus": j["gpus"], "submitted": iso(ts0 + j["submit_min"] * step),
             "start": iso(ts0 + j["start_min"] * step), "end": iso(ts0 + j["end_min"] * step)}
            for j in result.full.pool.jobs]
    surges = [{"service": s.service, "start": iso(ts0 + s.start_min * step), "end": iso(ts0 + s.end_min * step),
               "factor": s.factor} for s in result.surges]
    events = [{k: v for k, v in e.items() if k not in ("start_ms", "end_ms")} for e in result.events]
    out = {"scenario": sc.name, "description": sc.description, "seed": result.seed, "days": result.days,
           "gpus": result.gpus, "start": iso(ts0), "end": iso(ts0 + result.n_min * step), "scrape_s": sc.scrape_s,
           "version": SAMPLE_VERSION, "slos": slos,
           "event_rule": {"min_minutes": sc.min_event_min, "merge_gap_minutes": sc.merge_gap_min,
                          "timestamps": "start = ts of the first step over the SLO (inclusive), end = ts after the last (exclusive)"},
           "batch_jobs": jobs, "surges": surges, "events": events}
    if sc.change is not None:
        out["change"] = change_truth(result)
    if result.variants:
        # only a variant's truth says so: the default's truth.json stays byte for byte what it
        # was (the bundled excerpts ship it); readers take a missing key as [] / UTC / 60
        out["variants"] = list(result.variants)
        out["tz"] = zone_name(sc)
        out["export_scrape_s"] = export_scrape_s(result.variants)
    return out


def change_truth(result: SimResult) -> dict[str, Any]:
    """The pool's change of policy and each service's minutes over the SLO before and after it
    (the simulator's own p99, counted as Tidelens counts: :func:`analytics.measures.over_slo`)."""

    sc = result.scenario
    ch = sc.change
    cut = ch.day * MIN_PER_DAY  # the run's minute index of that midnight (ts_ms()'s spacing)
    at = int(result.ts_ms()[cut])
    p99 = result.p99_variants["full"]
    out: dict[str, Any] = {"at": iso(at), "at_ms": at, "policy": ch.policy, "day": ch.day,
                           "weekly_surges": ch.weekly_surges}
    if ch.policy == "partitioned":
        out["reservation_gpus"] = ch.reserved_gpus
    else:
        out["tidal_window"] = list(ch.tidal_hours)
    out["minutes_over_slo"] = {
        side: {s.name: minutes_over_slo(p99[s.name][sl], s.slo_p99_ms, step_s=sc.scrape_s) for s in sc.services}
        for side, sl in (("before", slice(0, cut)), ("after", slice(cut, None)))}
    out["batch_gpu_hours"] = {"before": _batch_gpu_hours(result, 0, cut), "after": _batch_gpu_hours(result, cut, None)}
    out["batch_queue_delay_min"] = {"before": _batch_wait_min(result, 0, cut),
                                    "after": _batch_wait_min(result, cut, result.days * MIN_PER_DAY)}
    return out


def _batch_wait_min(result: SimResult, a: int, b: int) -> float | None:
    """Mean minutes from submission to admission of the batch jobs admitted in minutes [a, b)."""
    waits = [r["start_min"] - r["submit_min"] for r in result.full.pool.jobs if a <= r["start_min"] < b]
    return round(sum(waits) / len(waits), 3) if waits else None


def _batch_gpu_hours(result: SimResult, a: int, b: int | None) -> float:
    pool = result.full.pool
    batch = np.array([p.klass == "batch" for p in pool.pods] + [False])
    held = batch[pool.holders[a:b]].sum(axis=1)  # holder -1 indexes the trailing False
    return round(gpu_hours(held, step_s=result.scenario.scrape_s), 1)


def _slo_metric(s: ServiceConfig) -> str:
    """The histogram family the service's SLO (and the truth's p99) is on."""
    if s.kind == "vllm":
        return sg.VLLM_E2E if s.slo_latency == "e2e" else sg.VLLM_TTFT
    return sg.HTTP_DURATION


def truth_p99(result: SimResult) -> pl.DataFrame:
    """The simulator's own per-minute p99 per service, with and without each factor."""
    ts = result.ts_ms()
    frames = []
    pool = result.full.pool
    for s in result.scenario.services:
        frames.append(pl.DataFrame({
            "ts_ms": ts, "service": [s.name] * len(ts),
            "p99_ms": result.p99_variants["full"][s.name].astype(np.float64),
            "requests": result.full.requests[s.name],
            "serving_replicas": (pool.serving[s.name] >= 0).sum(axis=1).astype(np.int32),
            "ready_replicas": pool.ready[s.name], "desired_replicas": pool.desired[s.name],
            "p99_no_batch_ms": result.p99_variants["no_batch"][s.name].astype(np.float64),
            "p99_no_surge_ms": result.p99_variants["no_surge"][s.name].astype(np.float64),
            "p99_neither_ms": result.p99_variants["neither"][s.name].astype(np.float64)}))
    return pl.concat(frames)


def _value_str(col: pl.Expr) -> pl.Expr:
    integral = (col == col.round(0)) & (col.abs() < 1e15)
    return pl.when(integral).then(col.cast(pl.Int64).cast(pl.Utf8)).otherwise(col.cast(pl.Utf8))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _prefixes(ss: SeriesSet) -> pl.DataFrame:
    rows = []
    for skey, metric, labels in ss.series.select("skey", "metric", "labels").iter_rows():
        lab = orjson.loads(labels)
        body = ",".join(f'{k}="{_escape(v)}"' for k, v in lab.items())
        rows.append((skey, f"{metric}{{{body}}}" if body else metric))
    return pl.DataFrame(rows, schema={"skey": pl.Int64, "prefix": pl.Utf8}, orient="row")


def _gz(data: bytes, path: Path, level: int = 1) -> None:
    """Gzip ``data`` to ``path``, reproducibly (no name, no time). Level 1: a day's exposition text
    compresses 2.7x faster than at 6 for 18% more bytes; the bundled excerpts keep 6 (their bytes
    are regenerated and compared)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=level) as fh:
        fh.write(data)
    path.write_bytes(buf.getvalue())


def exposition_text(ss: SeriesSet, samples: pl.DataFrame | None = None) -> str:
    """Concatenated timestamped scrapes (text format 0.0.4, ms timestamps), one per minute,
    each with a ``# TYPE`` line per family."""
    samples = ss.samples if samples is None else samples
    fam = ss.series.select("skey", "family").with_columns(
        pl.col("family").rank("min").cast(pl.Int64).alias("fam_rank"))
    rank_of_family = {f: f for f in fam["family"].unique().to_list()}
    type_lines = pl.DataFrame({"family": list(rank_of_family),
                               "type_line": [f"# TYPE {f} {family_type(f)}\n" for f in rank_of_family]})
    df = (samples.join(fam, on="skey").join(_prefixes(ss), on="skey").join(type_lines, on="family")
          .sort(["ts_ms", "fam_rank", "skey"]))
    first = (pl.col("ts_ms") != pl.col("ts_ms").shift(1)) | (pl.col("family") != pl.col("family").shift(1))
    line = pl.col("prefix") + " " + _value_str(pl.col("value")) + " " + pl.col("ts_ms").cast(pl.Utf8)
    out = df.select(pl.when(first.fill_null(True)).then(pl.col("type_line") + line).otherwise(line).alias("l"))
    return "\n".join(out["l"].to_list()) + "\n" if out.height else ""


def query_range_json(ss: SeriesSet, samples: pl.DataFrame | None = None) -> bytes:
    """One Prometheus ``query_range`` matrix response holding the given samples."""
    samples = ss.samples if samples is None else samples
    ts_s = (pl.col("ts_ms") // 1000).cast(pl.Utf8)
    exact = (pl.col("ts_ms") % 1000) == 0
    # sub-second scrapes (a scrape-interval variant) as Prometheus writes them: 1791158399.123
    frac_ms = (pl.col("ts_ms") % 1000).cast(pl.Utf8).str.zfill(3).str.strip_chars_end("0")
    ts_str = pl.when(exact).then(ts_s).otherwise(ts_s + "." + frac_ms)
    pairs = (samples.sort(["skey", "ts_ms"])
             .with_columns(("[" + ts_str + ',"' + _value_str(pl.col("value")) + '"]').alias("p"))
             .group_by("skey", maintain_order=True).agg(pl.col("p").str.join(",")))
    meta = {k: (m, lab) for k, m, lab in ss.series.select("skey", "metric", "labels").iter_rows()}
    parts = []
    for skey, joined in pairs.iter_rows():
        m, lab = meta[skey]
        labels = {"__name__": m, **orjson.loads(lab)}
        parts.append(b'{"metric":' + orjson.dumps(labels) + b',"values":[' + joined.encode() + b"]}")
    return b'{"status":"success","data":{"resultType":"matrix","result":[' + b",".join(parts) + b"]}}"


def long_frame(ss: SeriesSet, samples: pl.DataFrame | None = None) -> pl.DataFrame:
    """CSV/Parquet long layout: ``timestamp`` (epoch ms), ``metric``, ``value``, one column per label."""
    samples = ss.samples if samples is None else samples
    label_rows = [orjson.loads(x) for x in ss.series["labels"].to_list()]
    names = sorted({k for lab in label_rows for k in lab})
    cols = {"skey": ss.series["skey"], "metric": ss.series["metric"]}
    for name in names:
        cols[name] = [lab.get(name) for lab in label_rows]
    meta = pl.DataFrame(cols, schema={"skey": pl.Int64, "metric": pl.Utf8, **{n: pl.Utf8 for n in names}})
    return (samples.sort(["ts_ms", "skey"]).join(meta, on="skey", maintain_order="left")
            .select(pl.col("ts_ms").alias("timestamp"), "metric", "value", *names))


def _days(result: SimResult) -> Iterable[tuple[int, str]]:
    for d in range(result.days):
        yield d, iso(result.start_ms + d * 86_400_000)[:10]


def write_exports(result: SimResult, out_dir: Path, *, formats: tuple[str, ...] = ("prom-json", "prom-text"),
                  series: SeriesSet | None = None) -> list[Path]:
    """Write the run as a cluster would export it (one file per day and format), plus
    ``truth.json`` and ``truth_p99.parquet``. Returns the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ss = series or se.build_series(result)
    paths: list[Path] = []
    day_ms = 86_400_000
    step_ms = result.scenario.scrape_s * 1000
    for d, date in _days(result):
        lo = result.start_ms + d * day_ms
        # a day's file holds its steps (t - step, t], t = lo .. lo + day - step: the sub-minute
        # scrapes of a variant stay in their minute's file (60 s scrapes: [lo, lo + day))
        day = ss.samples.filter((pl.col("ts_ms") > lo - step_ms) & (pl.col("ts_ms") <= lo + day_ms - step_ms))
        if "prom-text" in formats:
            p = out_dir / "prom-text" / f"scrape-{date}.prom.gz"
            p.parent.mkdir(parents=True, exist_ok=True)
            _gz(exposition_text(ss, day).encode(), p)
            paths.append(p)
        if "prom-json" in formats:
            p = out_dir / "prom-json" / f"query_range-{date}.json.gz"
            p.parent.mkdir(parents=True, exist_ok=True)
            _gz(query_range_json(ss, day), p)
            paths.append(p)
        if "csv" in formats:
            p = out_dir / "csv" / f"samples-{date}.csv.gz"
            p.parent.mkdir(parents=True, exist_ok=True)
            buf = io.BytesIO()
            long_frame(ss, day).write_csv(buf)
            _gz(buf.getvalue(), p)
            paths.append(p)
        if "parquet" in formats:
            p = out_dir / "parquet" / f"samples-{date}.parquet"
            p.parent.mkdir(parents=True, exist_ok=True)
            long_frame(ss, day).write_parquet(p, compression="zstd", statistics=False)
            paths.append(p)
    return paths + _write_truth(result, out_dir)


def load_into(store: Store, result: SimResult, *, series: SeriesSet | None = None,
              chunk_samples: int | None = None) -> LoadResult:
    """Load the run straight into ``store`` (no files): the same series and samples as
    ingesting its exports, recorded as one source.

    A fast path: the run's samples are unique per series and timestamp and hold no DCGM
    blanks by construction, so they skip the store's staging merge (which de-duplicates and
    costs minutes for the default sample) and are inserted directly, in one transaction,
    series keyed and normalised by the store's own code.

    Parameters
    ----------
    series:
        The run's series when already built (else built here).
    chunk_samples:
        Build and key the series in pieces of about this many samples, spilled to Parquet
        beside the store and inserted with one DuckDB sort, for runs whose samples do not fit in
        memory (90 days x 512 GPUs: ~370M samples, ~9 GB as one frame, several times that while
        built and sorted). The store ends up row for row the same as without it. The sort spills
        past the store's memory limit: open it as ``Store(path, memory_limit="4GB")`` to bound it
        (a store's configuration is locked once open, :mod:`analytics.store_file`).
    """
    if chunk_samples is not None and series is None:
        return _load_chunked(store, result, chunk_samples)
    ss = series or se.build_series(result)
    name, hash_, note = _source_identity(result)
    if store.has_source(hash_):
        return LoadResult(name=name, format="sample", status="skipped", note="same content already loaded")
    con = store.con
    con.execute("BEGIN TRANSACTION")
    try:
        old_max_id = store._row(sq.SERIES_MAX_ID)[0]
        mapping = store._assign_series_ids(ss.series.select("skey", "metric", "labels"), old_max_id, name)
        # sorted here (polars, multi-threaded) so the store keeps its physical (series, ts) order
        sample_fast_in = (ss.samples.join(mapping, on="skey").select("series_id", "ts_ms", "value")
                          .sort(["series_id", "ts_ms"]))
        n_samples, n_series = sample_fast_in.height, sample_fast_in["series_id"].n_unique()
        first, last = sample_fast_in["ts_ms"].min(), sample_fast_in["ts_ms"].max()
        con.register("sample_fast_in", sample_fast_in)
        try:
            con.execute(q.SAMPLES_INSERT_DIRECT)
        finally:
            con.unregister("sample_fast_in")
        loaded = _record_source(store, name, hash_, note, int(n_series), int(n_samples), first, last, result)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return loaded


def _record_source(store: Store, name: str, hash_: str, note: str, n_series: int, n_samples: int,
                   first: int | None, last: int | None, result: SimResult | None = None) -> LoadResult:
    """The run's row in ``sources`` (inside the caller's transaction), and its load result; with
    ``result``, its services' SLOs declared in the store too, where the app and the CLI read them."""
    if result is not None:

        write_store_slos(store, {s.name: (s.slo_p99_ms, _slo_metric(s)) for s in result.scenario.services},
                         f"sample scenario {result.scenario.name}")
    store._row(sq.SOURCE_INSERT, {
        "name": name, "format": "sample", "hash": hash_, "series": n_series, "samples": n_samples,
        "first_ts_ms": first, "last_ts_ms": last, "status": "loaded", "error": None,
        "duplicates": 0, "blanks": 0, "note": note})
    return LoadResult(name=name, format="sample", status="loaded", series=n_series, samples=n_samples,
                      first_ts_ms=first, last_ts_ms=last, note=note)


def _source_identity(result: SimResult) -> tuple[str, str, str]:
    """Name, content hash and note of the source a run loads as."""
    key = f"{SAMPLE_VERSION}/{result.scenario.name}/{result.days}/{result.gpus}/{result.seed}"
    name = f"sample:{result.scenario.name}:{result.days}d:{result.gpus}gpus:seed{result.seed}"
    note = f"simulated {result.scenario.name}, version {SAMPLE_VERSION}"
    if result.variants:  # another export of the same seed is another source (the default keeps its hash)
        tag = "+".join(result.variants)
        key, name, note = f"{key}/{tag}", f"{name}:{tag}", f"{note}, variants {tag}"
    return name, hashlib.sha256(key.encode()).hexdigest(), note


def _load_chunked(store: Store, result: SimResult, chunk_samples: int) -> LoadResult:
    """:func:`load_into` in pieces: each keyed as it is built, its samples spilled to Parquet,
    then all inserted with one sort by (series, ts).

    The store's connection may read no file (:mod:`analytics.store_file`), so the pieces reach it
    as one Arrow stream read here, a batch at a time (not ``read_parquet``). On 40M samples with a
    500 MB limit this peaked at 772 MB against 598 MB for DuckDB's own reader, in the same time;
    a ``pyarrow.dataset`` scan, which reads ahead, took 1.9 GB.

    A series of the same key may recur in a later piece (a GPU idle again, say): keying piece by
    piece finds it as already known and gives it the same id, and new ids follow first
    appearance, as keying the whole run at once does; the final sort then lays the rows out as
    the one-piece path does.
    """
    name, hash_, note = _source_identity(result)
    if store.has_source(hash_):
        return LoadResult(name=name, format="sample", status="skipped", note="same content already loaded")
    con = store.con
    spill_root = None if store.path == ":memory:" else Path(store.path).resolve().parent
    with tempfile.TemporaryDirectory(prefix=".sample-load-", dir=spill_root) as spill:
        con.execute("BEGIN TRANSACTION")
        try:
            files: list[str] = []
            ids: list[np.ndarray] = []
            n_samples, first, last = 0, None, None
            for part in se.iter_series(result, chunk_samples=chunk_samples):
                max_id = store._row(sq.SERIES_MAX_ID)[0]
                mapping = store._assign_series_ids(part.series.select("skey", "metric", "labels"), max_id, name)
                keyed = part.samples.join(mapping, on="skey").select("series_id", "ts_ms", "value")
                del part
                f = Path(spill) / f"part-{len(files):05d}.parquet"
                keyed.write_parquet(f, compression="lz4", statistics=False)
                files.append(str(f))
                ids.append(keyed["series_id"].unique().to_numpy())
                n_samples += keyed.height
                lo, hi = keyed["ts_ms"].min(), keyed["ts_ms"].max()
                first = lo if first is None else min(first, lo)
                last = hi if last is None else max(last, hi)
                del keyed
            n_series = int(np.unique(np.concatenate(ids)).size) if ids else 0
            if files:
                sample_parts_in = _parquet_stream(files)
                con.register("sample_parts_in", sample_parts_in)
                try:
                    con.execute(q.SAMPLES_INSERT_SORTED_PARTS)
                finally:
                    con.unregister("sample_parts_in")
            loaded = _record_source(store, name, hash_, note, n_series, n_samples, first, last, result)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return loaded


def _parquet_stream(files: list[str]) -> Any:
    """The spilled pieces as one ``pyarrow.RecordBatchReader``, read a row group's batch at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def batches() -> Iterator[Any]:
        for f in files:
            yield from pq.ParquetFile(f).iter_batches()

    return pa.RecordBatchReader.from_batches(pq.read_schema(files[0]), batches())


# The excerpt of the default sample bundled in data/sample: a weekday morning (the fine-tune
# still holding GPUs at the ramp) on the first and last node.
EXCERPT_DAY = 2
EXCERPT_HOURS = (8, 12)


def write_excerpts(result: SimResult, out_dir: Path) -> list[Path]:
    """Small byte-reproducible excerpts of ``result`` in every format, plus its truth files."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    a = EXCERPT_DAY * MIN_PER_DAY + EXCERPT_HOURS[0] * 60
    b = EXCERPT_DAY * MIN_PER_DAY + EXCERPT_HOURS[1] * 60
    nodes = {result.topology.nodes[0], result.topology.nodes[-1]}
    gpus = {g.index for g in result.topology.gpus if g.node in nodes}
    ss = se.build_series(result, minutes=slice(a, b), gpu_filter=gpus)
    ss = SeriesSet(series=ss.series.join(ss.samples.select("skey").unique(), on="skey").sort("skey"),
                      samples=ss.samples)
    paths = []
    p = out_dir / "excerpt.prom.gz"
    _gz(exposition_text(ss).encode(), p, 6)
    paths.append(p)
    p = out_dir / "excerpt.json.gz"
    _gz(query_range_json(ss), p, 6)
    paths.append(p)
    p = out_dir / "excerpt.csv.gz"
    buf = io.BytesIO()
    long_frame(ss).write_csv(buf)
    _gz(buf.getvalue(), p, 6)
    paths.append(p)
    p = out_dir / "excerpt.parquet"
    long_frame(ss).write_parquet(p, compression="zstd", statistics=False)
    paths.append(p)
    return paths + _write_truth(result, out_dir)


def _write_truth(result: SimResult, out_dir: Path) -> list[Path]:
    """``truth.json`` and the simulator's own per-minute p99 beside the exports."""
    truth_json = out_dir / "truth.json"
    truth_json.write_bytes(orjson.dumps(truth(result), option=orjson.OPT_INDENT_2) + b"\n")
    p99 = out_dir / "truth_p99.parquet"
    truth_p99(result).write_parquet(p99, compression="zstd", statistics=False)
    return [truth_json, p99]
