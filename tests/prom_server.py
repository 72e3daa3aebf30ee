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


def backfill_rules(prometheus: str, promtool: str, data_dir: Path, rules_doc: dict, start_ms: int, end_ms: int,
                   *, scrape_s: int = 60, extra_args: tuple[str, ...] = (), timeout_s: float = 600) -> PromServer:
    """Backfill the recording rules of ``rules_doc`` over ``[start, end]`` into ``data_dir``; return
    a server started on it (the caller stops it).

    ``promtool tsdb create-blocks-from rules`` evaluates a group's rules without seeing each
    other's results, so the rules go in passes (:func:`analytics.rules.compile.passes`), each
    written to the same file under the same group name (Prometheus offsets a group's evaluation
    times by a hash of both: every pass then evaluates at the same times), the server restarted
    after each pass to see the blocks it wrote. The file's name is one whose offset promtool's
    block ends don't cut (:func:`analytics.rules.compile.backfill_drops_evaluations`).
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
            proc = subprocess.run([promtool, "tsdb", "create-blocks-from", "rules", "--quiet",
                                   f"--url={server.url}", f"--start={start_ms // 1000}",
                                   f"--end={end_ms // 1000 + scrape_s}", f"--output-dir={out}", str(path)],
                                  capture_output=True, text=True, timeout=timeout_s)
            if proc.returncode != 0:
                raise RuntimeError(f"promtool rules backfill (pass {i}) failed: {proc.stderr[-2000:]}")
            server.stop()
            for block in (out.iterdir() if out.exists() else ()):
                if (block / "meta.json").exists():
                    shutil.move(str(block), str(data_dir / block.name))
            server = start(prometheus, data_dir, scrape_s=scrape_s, extra_args=extra_args)
    except BaseException:
        server.stop()
        raise
    return server
