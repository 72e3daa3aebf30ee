"""Local GPUs sampled through NVML (``pynvml``, the ``nvidia-ml-py`` distribution).

Owns reading this machine's GPUs and writing what it reads under dcgm-exporter's series names
and labels, so every analysis works on it unchanged: NVML's utilization is
``DCGM_FI_DEV_GPU_UTIL``; engine activity (``DCGM_FI_PROF_GR_ENGINE_ACTIVE``) is written only
where GPM exists (Hopper and newer), per GPU and per MIG instance; MIG instances carry their
parent's ``UUID`` plus ``GPU_I_PROFILE`` and ``GPU_I_ID``. Per-process GPU memory is
``tidelens:nvml_process_fb_used`` (MiB) with the owning container and pod UID where the
process's cgroup tells them. Memory is NVML's v2 reading, as DCGM's: ``DCGM_FI_DEV_FB_USED``
without what the driver reserves, which is ``DCGM_FI_DEV_FB_RESERVED``. A device in use names its
biggest process as ``process="user/command"`` (with its container and pod UID), which the workload
map reads as the holder's pod, as it reads dcgm-exporter's ``hpc_job`` on a Slurm host.

Without a driver, :func:`available` says so in one line; nothing raises a traceback at a user.
"""

from __future__ import annotations

import hashlib
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import orjson
import polars as pl

from analytics import signals as s
from analytics.errors import TidelensError
from analytics.store import LoadResult, Sink, Store
from analytics.times import iso_utc

DCGM_FB_FREE = s.DCGM_FB_FREE
DCGM_FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"  # MiB the driver reserves (NVML v2; not in FB_USED)
DCGM_MEM_CLOCK = "DCGM_FI_DEV_MEM_CLOCK"  # MHz
PROCESS_FB_USED = "tidelens:nvml_process_fb_used"  # MiB per process
MIB = 1024 * 1024

# cgroup paths name the pod (kubepods...pod<uid>) and the container (64 hex digits).
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_CONTAINER_ID = re.compile(r"(?:^|[/-])([0-9a-f]{64})(?:\.scope)?$")

Sample = tuple[str, dict[str, str], float]  # metric, labels, value


class NvmlUnavailableError(TidelensError):
    """No usable NVIDIA driver or NVML library on this machine."""


def _nvml_module() -> ModuleType:
    import pynvml  # the nvidia-ml-py distribution

    return pynvml


def _explain(exc: BaseException, nvml: ModuleType) -> str:
    name = type(exc).__name__
    if name in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"):
        return (f"no NVIDIA driver here ({exc}): run `tidelens collect` on a machine with NVIDIA "
                "GPUs and their driver, or load telemetry from files or a Prometheus server")
    if name == "NVMLError_NoPermission":
        return f"NVML refused access ({exc}): run as a user allowed to read the GPUs"
    return f"NVML failed: {exc}"


def available(nvml: ModuleType | None = None) -> tuple[bool, str]:
    """Whether NVML works here, and a one-line message for the user (GPU count or why not)."""
    nvml = nvml or _nvml_module()  # nvidia-ml-py is a dependency: the import itself always works
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return False, _explain(exc, nvml)
    try:
        n = nvml.nvmlDeviceGetCount()
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        return (n > 0, f"{n} GPU(s), driver {driver}" if n else "NVML works but sees no GPUs")
    except nvml.NVMLError as exc:
        return False, _explain(exc, nvml)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def process_of(pid: int, proc_root: Path = Path("/proc")) -> str | None:
    """``user/command`` of a local process (from ``/proc``), or None where it is gone or hidden.

    dcgm-exporter names a GPU's holder by pod (Kubernetes) or ``hpc_job`` (Slurm); on a bare
    host the process is what there is. The workload map sees it as the holder's ``pod``, so a rule
    ``pod = "alice/.*"`` matches a user and ``pod = ".*/vllm"`` a command.
    """
    import pwd

    try:
        comm = (proc_root / str(pid) / "comm").read_text().strip()
        status = (proc_root / str(pid) / "status").read_text()
    except OSError:
        return None
    uid = next((line.split()[1] for line in status.splitlines() if line.startswith("Uid:")), None)
    try:
        user = pwd.getpwuid(int(uid)).pw_name if uid is not None else "?"
    except (KeyError, ValueError):
        user = uid or "?"
    return f"{user}/{comm or '?'}"


def container_of(pid: int, proc_root: Path = Path("/proc")) -> dict[str, str]:
    """``container_id`` and ``pod_uid`` of a process, from its cgroup (empty where it tells nothing).

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp()); (root / "7").mkdir()
    >>> _ = (root / "7" / "cgroup").write_text("0::/kubepods.slice/kubepods-pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-" + "ab" * 32 + ".scope\\n")
    >>> container_of(7, root)["pod_uid"]
    '1b2c3d4e-0000-1111-2222-333344445555'
    """
    try:
        text = (proc_root / str(pid) / "cgroup").read_text()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        if m := _POD_UID.search(path):
            out["pod_uid"] = m.group(1).replace("_", "-")
        if m := _CONTAINER_ID.search(path):
            out["container_id"] = m.group(1)
    return out


@dataclass
class _Device:
    handle: Any
    labels: dict[str, str]
    parent: Any = None  # the GPU handle of a MIG instance
    gi_id: int | None = None
    gpm_prev: Any = None


@dataclass
class NvmlSampler:
    """Reads every GPU (and MIG instance) of this machine once per :meth:`sample`.

    Parameters
    ----------
    nvml:
        The ``pynvml`` module, or a stand-in with the same functions and error types.
    hostname:
        The ``Hostname`` label; default this machine's name.
    proc_root:
        Where to read process cgroups.
    """

    nvml: ModuleType | None = None
    hostname: str | None = None
    proc_root: Path = Path("/proc")
    devices: list[_Device] = field(default_factory=list)
    gpm: bool = False
    notes: list[str] = field(default_factory=list)
    memory_v2: bool = True  # False once the driver lacks nvmlDeviceGetMemoryInfo_v2 (before R510)

    def open(self) -> "NvmlSampler":
        self.nvml = self.nvml or _nvml_module()
        nv = self.nvml
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise NvmlUnavailableError(_explain(exc, nv)) from exc
        self.hostname = self.hostname or socket.gethostname()
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            labels = {"gpu": str(i), "UUID": _text(nv.nvmlDeviceGetUUID(h)), "device": f"nvidia{i}",
                      "modelName": _text(nv.nvmlDeviceGetName(h)), "Hostname": self.hostname}
            try:
                labels["pci_bus_id"] = _text(nv.nvmlDeviceGetPciInfo(h).busId)
            except nv.NVMLError:
                pass
            gpm = self._gpm_supported(h)
            self.gpm = self.gpm or gpm
            migs = self._mig_instances(h, labels)
            if migs:
                self.devices.extend(migs)
                if gpm:
                    for d in migs:
                        d.gpm_prev = self._gpm_sample(d)
            else:
                dev = _Device(h, labels)
                if gpm:
                    dev.gpm_prev = self._gpm_sample(dev)
                self.devices.append(dev)
        if not self.gpm:
            self.notes.append("no GPM on these GPUs (before Hopper): DCGM_FI_PROF_GR_ENGINE_ACTIVE "
                              "is not written; analyses use DCGM_FI_DEV_GPU_UTIL")
        return self

    def close(self) -> None:
        nv = self.nvml
        if nv is None:
            return
        for d in self.devices:
            if d.gpm_prev is not None:
                try:
                    nv.nvmlGpmSampleFree(d.gpm_prev)
                except nv.NVMLError:
                    pass
                d.gpm_prev = None
        try:
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass

    def __enter__(self) -> "NvmlSampler":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- discovery ----------------------------------------------------------------------
    def _gpm_supported(self, h: Any) -> bool:
        nv = self.nvml
        try:
            return bool(nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice)
        except (nv.NVMLError, AttributeError):
            return False

    def _mig_instances(self, h: Any, parent: dict[str, str]) -> list[_Device]:
        nv = self.nvml
        try:
            current, _pending = nv.nvmlDeviceGetMigMode(h)
        except nv.NVMLError:
            return []
        if current != nv.NVML_DEVICE_MIG_ENABLE:
            return []
        out = []
        for j in range(nv.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
            except nv.NVMLError_NotFound:
                continue
            gi = nv.nvmlDeviceGetGpuInstanceId(mh)
            name = _text(nv.nvmlDeviceGetName(mh))
            profile = name.rsplit("MIG ", 1)[-1].strip() if "MIG " in name else "unknown"
            out.append(_Device(mh, {**parent, "GPU_I_PROFILE": profile, "GPU_I_ID": str(gi)},
                               parent=h, gi_id=gi))
        return out

    # -- sampling -----------------------------------------------------------------------
    def _gpm_sample(self, d: _Device) -> Any:
        nv = self.nvml
        sample = nv.nvmlGpmSampleAlloc()
        if d.parent is not None:
            nv.nvmlGpmMigSampleGet(d.parent, d.gi_id, sample)
        else:
            nv.nvmlGpmSampleGet(d.handle, sample)
        return sample

    def _gpm_activity(self, d: _Device) -> float | None:
        """Graphics-engine activity (0-1) since the previous sample of this device."""
        nv = self.nvml
        if d.gpm_prev is None:
            return None
        cur = self._gpm_sample(d)
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = 1
        mg.sample1 = d.gpm_prev
        mg.sample2 = cur
        mg.metrics[0].metricId = nv.NVML_GPM_METRIC_GRAPHICS_UTIL
        try:
            nv.nvmlGpmMetricsGet(mg)
            if mg.metrics[0].nvmlReturn != nv.NVML_SUCCESS:
                return None  # this metric failed alone (e.g. not on this instance)
            value = float(mg.metrics[0].value) / 100.0
        finally:
            nv.nvmlGpmSampleFree(d.gpm_prev)
            d.gpm_prev = cur
        return value

    def _memory(self, h: Any, lab: dict[str, str]) -> tuple[float, float, float | None] | None:
        """(used, free, reserved) bytes as dcgm-exporter reads them: NVML's v2 memory info, whose
        ``used`` leaves out what the driver reserves (DCGM does so since R510); v1 on older
        drivers, whose ``used`` includes it (reserved then unknown: None), with a note."""
        nv = self.nvml
        if self.memory_v2:
            try:
                m = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
                return float(m.used), float(m.free), float(m.reserved)
            except (nv.NVMLError_FunctionNotFound, nv.NVMLError_ArgumentVersionMismatch,
                    nv.NVMLError_NotSupported) as exc:
                self.memory_v2 = False
                self.notes.append(f"this driver has no nvmlDeviceGetMemoryInfo_v2 ({exc}; before R510): "
                                  "DCGM_FI_DEV_FB_USED is NVML's v1 'used', which includes the memory the "
                                  "driver reserves (a few hundred MiB more than dcgm-exporter and nvidia-smi "
                                  "show), and DCGM_FI_DEV_FB_RESERVED is not written")
            except nv.NVMLError as exc:
                self.notes.append(f"{lab['UUID']} memory: {exc}")
                return None
        try:
            m = nv.nvmlDeviceGetMemoryInfo(h)
        except nv.NVMLError as exc:
            self.notes.append(f"{lab['UUID']} memory: {exc}")
            return None
        return float(m.used), float(m.free), None

    def _holder(self, procs: list[Any]) -> dict[str, str]:
        """The labels naming a device's holder: its biggest process (``process`` = user/command,
        and the container and pod UID its cgroup names); none for an unused device."""
        known = [p for p in procs if process_of(p.pid, self.proc_root)]
        if not known:
            return {}
        top = max(known, key=lambda p: (getattr(p, "usedGpuMemory", None) or 0, -p.pid))
        return {"process": process_of(top.pid, self.proc_root) or "?", **container_of(top.pid, self.proc_root)}

    def sample(self) -> list[Sample]:
        """One reading of every device: ``(metric, labels, value)`` triples."""
        nv = self.nvml
        out: list[Sample] = []
        for d in self.devices:
            h, lab = d.handle, d.labels
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except nv.NVMLError:
                procs = []
            holder = self._holder(procs)
            if holder:  # the device's series name their holder, as dcgm-exporter's pod labels do
                lab = {**lab, **holder}

            def read(metric: str, fn: Callable[[], float]) -> None:
                try:
                    out.append((metric, lab, float(fn())))
                except nv.NVMLError_NotSupported:
                    pass  # e.g. utilization of a MIG instance, power of some boards
                except nv.NVMLError as exc:
                    self.notes.append(f"{lab['UUID']} {metric}: {exc}")

            if d.parent is None:
                read(s.DCGM_GPU_UTIL, lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu)
            mem = self._memory(h, lab)
            if mem is not None:
                used, free, reserved = mem
                out.append((s.DCGM_FB_USED, lab, used / MIB))
                out.append((DCGM_FB_FREE, lab, free / MIB))
                if reserved is not None:
                    out.append((DCGM_FB_RESERVED, lab, reserved / MIB))
            if d.parent is None:
                read(s.DCGM_POWER, lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0)
                read(s.DCGM_GPU_TEMP, lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
                read(s.DCGM_SM_CLOCK, lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
                read(DCGM_MEM_CLOCK, lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))
            if d.gpm_prev is not None:
                try:
                    act = self._gpm_activity(d)
                    if act is not None:
                        out.append((s.DCGM_GR_ENGINE_ACTIVE, lab, act))
                except nv.NVMLError as exc:
                    self.notes.append(f"{lab['UUID']} GPM: {exc}")
            for p in procs:
                used = getattr(p, "usedGpuMemory", None)
                if used is None:
                    continue  # NVML hides per-process memory in some modes
                plab = {**d.labels, "pid": str(p.pid), **container_of(p.pid, self.proc_root)}
                if who := process_of(p.pid, self.proc_root):
                    plab["process"] = who
                out.append((PROCESS_FB_USED, plab, used / MIB))
        return out


def _land(store: Store, host: str, rows: list[tuple[str, dict[str, str], int, float]]) -> LoadResult:
    keys: dict[tuple[str, str], int] = {}
    series: list[tuple[int, str, str]] = []
    s_skey: list[int] = []
    s_ts: list[int] = []
    s_val: list[float] = []
    for metric, labels, ts, value in rows:
        lab = orjson.dumps(labels, option=orjson.OPT_SORT_KEYS).decode()
        k = keys.get((metric, lab))
        if k is None:
            k = keys[(metric, lab)] = len(keys)
            series.append((k, metric, lab))
        s_skey.append(k)
        s_ts.append(ts)
        s_val.append(value)
    first, last = min(s_ts), max(s_ts)
    content = orjson.dumps([series, s_skey, s_ts, s_val])
    name = f"nvml://{host}/{_iso(first)}..{_iso(last)}"

    def parse(sink: Sink) -> str:
        sink.add_series(pl.DataFrame(series, schema={"skey": pl.Int64, "metric": pl.Utf8,
                                                     "labels": pl.Utf8}, orient="row"))
        sink.add_samples(pl.DataFrame({"skey": s_skey, "ts_ms": s_ts, "value": s_val},
                                      schema={"skey": pl.Int64, "ts_ms": pl.Int64, "value": pl.Float64}))
        return "sampled locally through NVML"

    return store.load(name, "nvml", hashlib.sha256(content).hexdigest(), parse)


def _iso(ms: int) -> str:
    return iso_utc(ms // 1000 * 1000)  # a source name: whole seconds


@dataclass
class CollectConfig:
    """How often and how long to sample local GPUs."""

    interval_ms: int = field(default=1000, metadata={"help": "time between samples"})
    duration_ms: int = field(default=600_000, metadata={"help": "how long to sample"})
    flush_ms: int = field(default=60_000, metadata={
        "help": "write to the store at least this often (one source per flush)"})


def collect(store: Store, config: CollectConfig | None = None, *, sampler: NvmlSampler | None = None,
            clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
            progress: Callable[[int, int, str], None] | None = None,
            stop: Callable[[], bool] | None = None) -> list[LoadResult]:
    """Sample local GPUs every ``interval`` for ``duration`` and write them to ``store``.

    Samples are flushed as one source per ``flush_ms`` (and at the end, and on Ctrl-C), so an
    interrupted collection keeps what it read. Raises :class:`NvmlUnavailableError` with a
    one-line reason when there is no driver.
    """
    config = config or CollectConfig()
    sampler = sampler or NvmlSampler()
    results: list[LoadResult] = []
    n_total = max(1, config.duration_ms // config.interval_ms)
    with sampler:
        host = sampler.hostname or "localhost"
        buf: list[tuple[str, dict[str, str], int, float]] = []
        start = clock()
        last_flush = start
        n = 0
        try:
            while n < n_total and not (stop and stop()):
                t = clock()
                ts = int(t * 1000)
                buf.extend((m, lab, ts, v) for m, lab, v in sampler.sample())
                n += 1
                if progress:
                    progress(n, n_total, f"{len(sampler.devices)} device(s), {len(buf)} samples buffered")
                if buf and (t - last_flush) * 1000 >= config.flush_ms:
                    results.append(_land(store, host, buf))
                    buf, last_flush = [], t
                if n < n_total:
                    # Sleep to the next tick of the grid, so slow reads do not drift the interval.
                    next_t = start + n * config.interval_ms / 1000
                    sleep(max(0.0, next_t - clock()))
        finally:
            if buf:
                results.append(_land(store, host, buf))
    return results
