"""Local GPUs through NVML, with a fake at the pynvml boundary (real names, arities, error types)."""

from __future__ import annotations

import types
from pathlib import Path

import orjson
import pynvml
import pytest

from analytics import nvml
from analytics import signals as s

MIB = 1024 * 1024


class _Struct:
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


RESERVED_MIB = 615  # what an idle H200 on driver 580 reserves (issue 38)


def fake_pynvml(*, gpus: int = 2, mig_on: int | None = None, gpm: bool = True, memory_v2: bool = True,
                init_error: type[pynvml.NVMLError] | None = None) -> types.ModuleType:
    """A stand-in for ``pynvml``: the same function names and arities, real error classes.

    GPU ``mig_on`` (if any) is MIG-enabled with a 3g.40gb (GI 1) and a 1g.10gb (GI 2)
    instance; GPU 0 runs a containerised process. GPM counters advance 0.5 % per sample call.
    Memory as the driver reports it: v1 ``used`` includes the reserved memory, v2's does not;
    ``memory_v2=False`` is a driver before R510 (no ``nvmlDeviceGetMemoryInfo_v2``).
    """
    m = types.ModuleType("pynvml")
    for name in dir(pynvml):  # constants and error classes are the real ones
        if name.startswith(("NVML_", "NVMLError")):
            setattr(m, name, getattr(pynvml, name))
    state = {"init": 0, "gpm_calls": {}, "freed": 0}
    m.state = state
    m.nvmlMemory_v2 = pynvml.nvmlMemory_v2
    gpu_handles = [("gpu", i) for i in range(gpus)]

    def nvmlInit():  # noqa: N802
        if init_error is not None:
            raise init_error()
        state["init"] += 1

    def nvmlShutdown():  # noqa: N802
        state["init"] -= 1

    def nvmlSystemGetDriverVersion():  # noqa: N802
        return "575.57.08"

    def nvmlDeviceGetCount():  # noqa: N802
        return gpus

    def nvmlDeviceGetHandleByIndex(index):  # noqa: N802
        if not 0 <= index < gpus:
            raise pynvml.NVMLError_InvalidArgument()
        return gpu_handles[index]

    def nvmlDeviceGetUUID(handle):  # noqa: N802
        return f"GPU-{handle[1]:04d}"

    def nvmlDeviceGetName(handle):  # noqa: N802
        if handle[0] == "mig":
            return "NVIDIA H100 80GB HBM3 MIG " + ("3g.40gb" if handle[2] == 1 else "1g.10gb")
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPciInfo(handle):  # noqa: N802
        return _Struct(busId=f"00000000:{handle[1] + 0x18:02X}:00.0")

    def nvmlDeviceGetUtilizationRates(handle):  # noqa: N802
        if handle[0] == "mig":
            raise pynvml.NVMLError_NotSupported()
        return _Struct(gpu=37 + handle[1], memory=10)

    def nvmlDeviceGetMemoryInfo(handle, version=None):  # noqa: N802
        used = (1000 + 100 * handle[1]) * MIB if handle[0] == "gpu" else 2000 * handle[2] * MIB
        reserved = RESERVED_MIB * MIB if handle[0] == "gpu" else 0
        total = 81559 * MIB
        if version is None:
            return _Struct(total=total, used=used + reserved, free=total - used - reserved)
        if not memory_v2:
            raise pynvml.NVMLError_FunctionNotFound()
        assert version == pynvml.nvmlMemory_v2
        return _Struct(version=version, total=total, reserved=reserved, used=used, free=total - used - reserved)

    def nvmlDeviceGetPowerUsage(handle):  # noqa: N802
        if handle[1] == 1:
            raise pynvml.NVMLError_NotSupported()
        return 312_500

    def nvmlDeviceGetTemperature(handle, sensor):  # noqa: N802
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return 61

    def nvmlDeviceGetClockInfo(handle, type):  # noqa: N802,A002
        return {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619}[type]

    def nvmlDeviceGetMigMode(device):  # noqa: N802
        if device[0] == "gpu" and device[1] == mig_on:
            return [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE]
        if device[1] == 0:
            raise pynvml.NVMLError_NotSupported()
        return [pynvml.NVML_DEVICE_MIG_DISABLE, pynvml.NVML_DEVICE_MIG_DISABLE]

    def nvmlDeviceGetMaxMigDeviceCount(device):  # noqa: N802
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(device, index):  # noqa: N802
        if index >= 2:
            raise pynvml.NVMLError_NotFound()
        return ("mig", device[1], index + 1)

    def nvmlDeviceGetGpuInstanceId(device):  # noqa: N802
        return device[2]

    def nvmlDeviceGetComputeRunningProcesses(handle):  # noqa: N802
        if handle == ("gpu", 0):
            return [_Struct(pid=4242, usedGpuMemory=512 * MIB), _Struct(pid=99, usedGpuMemory=None)]
        return []

    def nvmlGpmQueryDeviceSupport(device):  # noqa: N802
        return _Struct(version=1, isSupportedDevice=1 if gpm else 0)

    def nvmlGpmSampleAlloc():  # noqa: N802
        return _Struct(key=None, n=0)

    def nvmlGpmSampleFree(gpmSample):  # noqa: N802,N803
        state["freed"] += 1

    def _take(key, sample):
        n = state["gpm_calls"].get(key, 0) + 1
        state["gpm_calls"][key] = n
        sample.key, sample.n = key, n
        return sample

    def nvmlGpmSampleGet(device, gpmSample):  # noqa: N802,N803
        return _take(device, gpmSample)

    def nvmlGpmMigSampleGet(device, gpuInstanceId, gpmSample):  # noqa: N802,N803
        return _take((device, gpuInstanceId), gpmSample)

    class c_nvmlGpmMetricsGet_t:  # noqa: N801
        def __init__(self) -> None:
            self.version = 0
            self.numMetrics = 0
            self.sample1 = self.sample2 = None
            self.metrics = [_Struct(metricId=0, nvmlReturn=0, value=0.0) for _ in range(4)]

    def nvmlGpmMetricsGet(metricsGet):  # noqa: N802,N803
        assert metricsGet.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        assert metricsGet.metrics[0].metricId == pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL
        a, b = metricsGet.sample1, metricsGet.sample2
        assert a.key == b.key and b.n == a.n + 1
        metricsGet.metrics[0].value = 0.5 * b.n
        return metricsGet

    for fn in list(locals().values()):
        if callable(fn) and getattr(fn, "__name__", "").startswith(("nvml", "c_nvml")):
            setattr(m, fn.__name__, fn)
    return m


def _proc(tmp_path: Path) -> Path:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_1111_2222_3333_444455556666"
        ".slice/cri-containerd-" + "c0" * 32 + ".scope\n")
    (tmp_path / "4242" / "comm").write_text("vllm\n")
    (tmp_path / "4242" / "status").write_text("Name:\tvllm\nUid:\t0\t0\t0\t0\n")
    return tmp_path


def test_fake_matches_the_real_signatures():
    import inspect
    fake = fake_pynvml()
    for name in dir(fake):
        if name.startswith("nvml") and callable(getattr(pynvml, name, None)):
            real = inspect.signature(getattr(pynvml, name)).parameters
            mine = inspect.signature(getattr(fake, name)).parameters
            assert [p for p in mine if mine[p].default is inspect.Parameter.empty] == \
                [p for p in real if real[p].default is inspect.Parameter.empty], name


def test_no_driver_is_a_message_not_a_traceback():
    ok, msg = nvml.available(fake_pynvml(init_error=pynvml.NVMLError_LibraryNotFound))
    assert not ok and "no NVIDIA driver" in msg
    with pytest.raises(nvml.NvmlUnavailableError, match="no NVIDIA driver"):
        nvml.NvmlSampler(fake_pynvml(init_error=pynvml.NVMLError_DriverNotLoaded)).open()
    assert nvml.available(fake_pynvml(gpus=3)) == (True, "3 GPU(s), driver 575.57.08")


def test_samples_use_dcgm_names_labels_and_units(tmp_path):
    fake = fake_pynvml(gpus=2, mig_on=1)
    with nvml.NvmlSampler(fake, hostname="node-a", proc_root=_proc(tmp_path)) as sampler:
        first = sampler.sample()
        second = sampler.sample()
    assert fake.state["init"] == 0  # shut down again
    by = {(m, lab.get("gpu"), lab.get("GPU_I_ID"), lab.get("pid")): (lab, v) for m, lab, v in second}
    lab, util = by[(s.DCGM_GPU_UTIL, "0", None, None)]
    assert util == 37 and lab["UUID"] == "GPU-0000" and lab["Hostname"] == "node-a"
    assert lab["modelName"] == "NVIDIA H100 80GB HBM3" and lab["pci_bus_id"] == "00000000:18:00.0"
    assert by[(s.DCGM_FB_USED, "0", None, None)][1] == 1000
    assert by[(s.DCGM_POWER, "0", None, None)][1] == 312.5
    assert by[(s.DCGM_GPU_TEMP, "0", None, None)][1] == 61
    assert by[(s.DCGM_SM_CLOCK, "0", None, None)][1] == 1980
    # MIG instances: the parent's UUID plus profile and instance id; no GPU_UTIL there.
    mig_lab, fb = by[(s.DCGM_FB_USED, "1", "1", None)]
    assert mig_lab["GPU_I_PROFILE"] == "3g.40gb" and mig_lab["UUID"] == "GPU-0001" and fb == 2000
    assert by[(s.DCGM_FB_USED, "1", "2", None)][0]["GPU_I_PROFILE"] == "1g.10gb"
    assert (s.DCGM_GPU_UTIL, "1", "1", None) not in by
    # GPM: activity per GPU and per MIG instance from the second sample on, as a 0-1 ratio.
    # (the first reading covers the time since open(), which took the first GPM sample).
    assert [v for m, lab, v in first if m == s.DCGM_GR_ENGINE_ACTIVE and lab["gpu"] == "0"] == [0.01]
    assert by[(s.DCGM_GR_ENGINE_ACTIVE, "0", None, None)][1] == pytest.approx(0.015)
    assert (s.DCGM_GR_ENGINE_ACTIVE, "1", "2", None) in by
    # The process: its memory and the container and pod its cgroup names; hidden memory skipped.
    plab, mib = by[(nvml.PROCESS_FB_USED, "0", None, "4242")]
    assert mib == 512 and plab["container_id"] == "c0" * 32
    assert plab["pod_uid"] == "0a1b2c3d-1111-2222-3333-444455556666"
    assert (nvml.PROCESS_FB_USED, "0", None, "99") not in by
    assert fake.state["freed"] >= 3


def test_without_gpm_no_engine_activity_and_a_note():
    with nvml.NvmlSampler(fake_pynvml(gpm=False), hostname="h") as sampler:
        sampler.sample()
        got = sampler.sample()
    assert not any(m == s.DCGM_GR_ENGINE_ACTIVE for m, _, _ in got)
    assert any("no GPM" in n for n in sampler.notes)


def test_collect_writes_series_the_store_normalises(store):
    now = [1_767_571_200.0]

    def clock() -> float:
        return now[0]

    def sleep(sec: float) -> None:
        now[0] += sec if sec > 0 else 0.001

    seen: list[tuple[int, int, str]] = []
    cfg = nvml.CollectConfig(interval_ms=1000, duration_ms=5000, flush_ms=2000)
    results = nvml.collect(store, cfg, sampler=nvml.NvmlSampler(fake_pynvml(), hostname="node-a"),
                           clock=clock, sleep=sleep, progress=lambda *a: seen.append(a))
    assert [r.status for r in results] == ["loaded"] * len(results) and len(results) >= 2
    assert seen[-1][:2] == (5, 5)
    util = store.series(s.DCGM_GPU_UTIL)
    assert sorted(util["uuid"].to_list()) == ["GPU-0000", "GPU-0001"]
    assert set(util["hostname"].to_list()) == {"node-a"}
    per_gpu = store.metrics().filter(store.metrics()["metric"] == s.DCGM_GPU_UTIL)["samples"][0]
    assert per_gpu == 10  # 2 GPUs x 5 samples, one second apart
    names = store.sources()["name"].to_list()
    assert all(n.startswith("nvml://node-a/2026-01-05T00:00:0") for n in names)
    labels = orjson.loads(util["labels"][0])
    assert labels["device"] in ("nvidia0", "nvidia1")


def test_cli_collect(monkeypatch, tmp_path, capsys):
    from analytics.cli import main

    monkeypatch.setattr(nvml, "_nvml_module", lambda: fake_pynvml(init_error=pynvml.NVMLError_LibraryNotFound))
    assert main(["collect", "--db", ":memory:"]) == 2
    assert "no NVIDIA driver" in capsys.readouterr().err

    monkeypatch.setattr(nvml, "_nvml_module", lambda: fake_pynvml(gpus=1))
    db = str(tmp_path / "c.duckdb")
    assert main(["collect", "--db", db, "--interval", "1ms", "--duration", "3ms", "--json"]) == 0
    out = capsys.readouterr()
    assert "1 GPU(s)" in out.err
    results = orjson.loads(out.out)
    assert results and results[0]["status"] == "loaded" and results[0]["series"] > 0


def test_memory_is_read_as_dcgm_reads_it_without_the_reserved_part(tmp_path):
    with nvml.NvmlSampler(fake_pynvml(gpus=1), hostname="h", proc_root=_proc(tmp_path)) as sampler:
        got = {m: v for m, lab, v in sampler.sample() if "pid" not in lab}
    assert got[s.DCGM_FB_USED] == 1000  # v1 says 1615: the driver's reserve counted as used
    assert got[nvml.DCGM_FB_RESERVED] == RESERVED_MIB
    assert got[s.DCGM_FB_FREE] == 81559 - 1000 - RESERVED_MIB
    assert not any("v2" in n for n in sampler.notes)


def test_an_old_driver_falls_back_to_v1_memory_with_a_note(tmp_path):
    with nvml.NvmlSampler(fake_pynvml(gpus=2, memory_v2=False), hostname="h") as sampler:
        first = sampler.sample()
        sampler.sample()
    used = {lab["gpu"]: v for m, lab, v in first if m == s.DCGM_FB_USED}
    assert used == {"0": 1000 + RESERVED_MIB, "1": 1100 + RESERVED_MIB}
    assert not any(m == nvml.DCGM_FB_RESERVED for m, _, _ in first)
    [note] = [n for n in sampler.notes if "nvmlDeviceGetMemoryInfo_v2" in n]  # said once, not per read
    assert "includes the memory the driver reserves" in note


def test_a_local_process_names_its_gpus_holder_and_the_workload_map_classifies_it(store, tmp_path):
    from analytics.workloads import WorkloadMap, classify_pods, load_map

    now = [1_767_571_200.0]
    cfg = nvml.CollectConfig(interval_ms=1000, duration_ms=2000, flush_ms=60_000)
    sampler = nvml.NvmlSampler(fake_pynvml(gpus=2), hostname="node-a", proc_root=_proc(tmp_path))
    nvml.collect(store, cfg, sampler=sampler, clock=lambda: now[0],
                 sleep=lambda sec: now.__setitem__(0, now[0] + max(sec, 0.001)))
    util = store.series(s.DCGM_GPU_UTIL).sort("gpu")
    assert util["pod"].to_list() == ["root/vllm", None]  # GPU 1 runs nothing: no holder
    assert orjson.loads(util["labels"][0])["container_id"] == "c0" * 32
    [pod] = classify_pods(store, WorkloadMap()).filter(pod="root/vllm").iter_rows(named=True)
    assert (pod["cls"], pod["rule"]) == ("inference", "default: inference name")
    # a user's rule on the user or the command
    toml = tmp_path / "tidelens.toml"
    toml.write_text('[[rule]]\nname = "root runs batch"\npod = "root/.*"\nclass = "batch"\n')
    [pod] = classify_pods(store, load_map(toml)).filter(pod="root/vllm").iter_rows(named=True)
    assert (pod["cls"], pod["rule"]) == ("batch", "root runs batch")


def test_dcgm_exporters_slurm_job_label_names_the_holder(store, tmp_path):
    from analytics.ingest import ingest_bytes
    from analytics.workloads import classify_pods, load_map

    text = (b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-0",Hostname="hpc-1",hpc_job="81342"} 97 1767571200000\n'
            b'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-1",Hostname="hpc-1"} 0 1767571200000\n')
    ingest_bytes(store, "slurm.prom", text)
    assert store.series(s.DCGM_GPU_UTIL).sort("gpu")["pod"].to_list() == ["81342", None]
    toml = tmp_path / "tidelens.toml"
    toml.write_text('[[rule]]\nname = "slurm jobs train"\npod = "[0-9]+"\nclass = "batch"\nteam = "hpc"\n')
    [pod] = classify_pods(store, load_map(toml)).iter_rows(named=True)
    assert (pod["pod"], pod["cls"], pod["team"]) == ("81342", "batch", "hpc")
