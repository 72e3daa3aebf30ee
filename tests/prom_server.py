"""A real Prometheus for tests: backfill OpenMetrics with promtool, start, poll ready, stop.

Used by the session-scoped ``prometheus`` fixture (``tests/plugins/prometheus.py``). Needs
Debian's ``prometheus`` and ``promtool`` on PATH; in CI (``CI=true``) their absence fails the
tests instead of skipping them.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import requests

Sample = tuple[str, dict[str, str], int, float]  # metric, labels, ts_ms, value


def require_binaries() -> tuple[str, str] | None:
    """Paths of ``prometheus`` and ``promtool``, or ``None`` (outside CI) when missing."""
    prom, tool = shutil.which("prometheus"), shutil.which("promtool")
    if prom and tool:
        return prom, tool
    if os.environ.get("CI", "").lower() == "true":
        raise RuntimeError("prometheus/promtool not found: .ci/run installs them with apt "
                           "(apt-get install prometheus)")
    return None


def _fmt_value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def write_openmetrics(samples: Iterable[Sample], path: Path) -> Path:
    """Write samples as untyped OpenMetrics (seconds timestamps), grouped by metric and series."""
    by_metric: dict[str, dict[tuple, list[tuple[int, float]]]] = {}
    for metric, labels, ts_ms, value in samples:
        key = tuple(sorted(labels.items()))
        by_metric.setdefault(metric, {}).setdefault(key, []).append((ts_ms, value))
    with path.open("w") as fh:
        for metric, series in by_metric.items():
            for key, points in series.items():
                lab = ",".join(f'{k}="{_esc(v)}"' for k, v in key)
                head = f"{metric}{{{lab}}}" if lab else metric
                for ts_ms, value in sorted(points):
                    fh.write(f"{head} {_fmt_value(value)} {ts_ms / 1000:.3f}\n")
        fh.write("# EOF\n")
    return path


def backfill(promtool: str, om_path: Path, data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(om_path),
                           str(data_dir)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"promtool backfill failed: {proc.stderr[-2000:]}")


def backfill_windows(promtool: str, om_paths: Iterable[Path], data_dir: Path, *, jobs: int = 2,
                     timeout_s: float = 600) -> None:
    """Backfill several OpenMetrics files into one data dir, ``jobs`` promtool processes at a time.

    Debian's promtool 2.42 has no ``--max-block-duration`` and re-reads its whole input once per
    2-hour block, so a multi-day file costs (days x 12) passes. Files that each hold one
    2-hour window aligned to multiples of 7200 s since the epoch make one block apiece, which
    keeps the backfill linear in the data. Each file must be a whole OpenMetrics document.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    pending = list(om_paths)
    running: list[tuple[Path, subprocess.Popen]] = []
    try:
        while pending or running:
            while pending and len(running) < max(1, jobs):
                path = pending.pop(0)
                proc = subprocess.Popen([promtool, "tsdb", "create-blocks-from", "openmetrics", str(path),
                                         str(data_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
                running.append((path, proc))
            path, proc = running.pop(0)
            _, err = proc.communicate(timeout=timeout_s)
            if proc.returncode != 0:
                raise RuntimeError(f"promtool backfill of {path} failed: {err[-2000:]}")
    finally:
        for _, proc in running:  # an error above: don't leave promtool running
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PromServer:
    url: str
    process: subprocess.Popen
    data_dir: Path
    log_path: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start(prometheus: str, data_dir: Path, *, scrape_s: int = 60, attempts: int = 300,
          wait_s: float = 0.1, extra_args: tuple[str, ...] = ()) -> PromServer:
    """Start Prometheus on a free loopback port over ``data_dir`` and wait for ``/-/ready``.

    Retention is long (backfilled data is old); the lookback delta equals the scrape interval
    because backfilled series carry no staleness markers.
    """
    config = data_dir.parent / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: %ds\nscrape_configs: []\n" % scrape_s)
    log_path = data_dir.parent / "prometheus.log"
    last_error = ""
    for _ in range(3):  # a port taken between free_port() and bind: try another
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = log_path.open("w")
        proc = subprocess.Popen(
            [prometheus, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y",
             f"--query.lookback-delta={scrape_s}s", "--log.level=warn", *extra_args],
            stdout=log, stderr=subprocess.STDOUT)
        server = PromServer(url, proc, data_dir, log_path)
        for _ in range(attempts):
            if proc.poll() is not None:
                break
            try:
                if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    return server
            except requests.exceptions.RequestException:
                pass
            time.sleep(wait_s)  # polling helper of the fixture, not a test
        server.stop()
        last_error = log_path.read_text()[-2000:]
    raise RuntimeError(f"prometheus did not become ready: {last_error}")


def rule_slices(start_s: int, end_s: int, jobs: int, block_s: int = 7200) -> list[tuple[int, int]]:
    """``[start_s, end_s]`` cut into at most ``jobs`` runs of whole ``block_s`` blocks, as
    ``(start, end)`` seconds for promtool's ``--start``/``--end``.

    promtool's rules backfill walks epoch-aligned blocks and evaluates each from the group's
    first aligned time in it to the block's last second; a slice that starts on a block's first
    second and ends on a block's last one evaluates exactly what the whole range does there.

    >>> rule_slices(0, 4 * 7200 + 59, 2)
    [(0, 14399), (14400, 28859)]
    >>> rule_slices(100, 200, 4)
    [(100, 200)]
    >>> rule_slices(0, 7200, 2)  # promtool refuses a slice that starts where it ends
    [(0, 7200)]
    >>> rule_slices(7199, 10800, 2)
    [(7199, 10800)]
    """
    first = start_s // block_s
    blocks = end_s // block_s - first + 1
    jobs = max(1, min(jobs, blocks))
    cuts = [first + blocks * k // jobs for k in range(jobs + 1)]
    out: list[tuple[int, int]] = []
    for a, b in zip(cuts, cuts[1:]):
        lo, hi = max(start_s, a * block_s), min(end_s, b * block_s - 1)
        if out and (lo >= hi or out[-1][0] >= out[-1][1]):  # a one-second slice joins its neighbour
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def backfill_rules(prometheus: str, promtool: str, data_dir: Path, rules_doc: dict, start_ms: int, end_ms: int,
                   *, scrape_s: int = 60, extra_args: tuple[str, ...] = (), timeout_s: float | None = 600,
                   jobs: int = 1) -> PromServer:
    """Backfill the recording rules of ``rules_doc`` over ``[start, end]`` into ``data_dir``; return
    a server started on it (the caller stops it).

    ``promtool tsdb create-blocks-from rules`` evaluates a group's rules without seeing each
    other's results, so the rules go in passes (:func:`analytics.rules.compile.passes`), each
    written to the same file under the same group name (Prometheus offsets a group's evaluation
    times by a hash of both: every pass then evaluates at the same times), the server restarted
    after each pass to see the blocks it wrote. The file's name is one whose offset promtool's
    block ends don't cut (:func:`analytics.rules.compile.backfill_drops_evaluations`). With
    ``jobs`` > 1 each pass runs that many promtool processes on whole-block slices of the range
    (:func:`rule_slices`): the server evaluates one query per process at a time, so a pass
    takes about 1/jobs as long and writes the same samples.
    """
    import yaml

    from analytics.rules.compile import backfill_drops_evaluations, passes

    group = rules_doc["groups"][0]
    interval_s = int(str(group["interval"]).rstrip("s"))
    # a name whose evaluation offset promtool's 2-hour blocks don't cut (one step a block lost)
    path = next(p for p in (data_dir.parent / f"tidelens.rules{f'.{i}' if i else ''}.yml" for i in range(100))
                if not backfill_drops_evaluations(str(p), group["name"], interval_s))
    server = start(prometheus, data_dir, scrape_s=scrape_s, extra_args=extra_args)
    try:
        for i, rules in enumerate(passes(rules_doc), start=1):
            path.write_text(yaml.safe_dump({"groups": [{**group, "rules": rules}]}, sort_keys=False,
                                           allow_unicode=True, width=100_000), encoding="utf-8")
            out = data_dir.parent / f"rules-pass-{i}"
            shutil.rmtree(out, ignore_errors=True)
            slices = rule_slices(start_ms // 1000, end_ms // 1000 + scrape_s, jobs)
            procs = [subprocess.Popen([promtool, "tsdb", "create-blocks-from", "rules", "--quiet",
                                       f"--url={server.url}", f"--start={a}", f"--end={b}",
                                       f"--output-dir={out / str(k)}", str(path)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                     for k, (a, b) in enumerate(slices)]
            try:
                errs = [(p.communicate(timeout=timeout_s)[1], p.returncode) for p in procs]
            finally:  # one slice failing or timing out leaves no promtool behind
                for p in procs:
                    if p.poll() is None:
                        p.kill()
            for err, rc in errs:
                if rc != 0:
                    raise RuntimeError(f"promtool rules backfill (pass {i}) failed: {err[-2000:]}")
            server.stop()
            for block in (out.glob("*/*") if out.exists() else ()):
                if (block / "meta.json").exists():
                    shutil.move(str(block), str(data_dir / block.name))
            server = start(prometheus, data_dir, scrape_s=scrape_s, extra_args=extra_args)
    except BaseException:
        server.stop()
        raise
    return server
