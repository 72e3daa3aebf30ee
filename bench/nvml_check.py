"""What a real GPU machine reports through NVML, as Tidelens would store it.

Run by hand on a machine with NVIDIA GPUs::

    .venv/bin/python bench/nvml_check.py [--samples 3] [--interval 1]

Prints NVML's availability line, each device (MIG instances included) and every series one
sample produces (dcgm-exporter names and labels), whether GPM engine activity is available, the
time one full sample takes, and a short collect() into an in-memory store with the store's
normalised columns. Peer: ``nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw``
in the same run, so the numbers can be compared by eye.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time

from analytics import nvml
from analytics.store import Store


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    ok, message = nvml.available()
    print(f"NVML: {message}")
    if not ok:
        return 0  # nothing to report here; `make bench` runs on machines without GPUs too
    with nvml.NvmlSampler() as sampler:
        print(f"devices: {len(sampler.devices)}; GPM: {sampler.gpm}")
        for d in sampler.devices:
            print("  ", {k: v for k, v in d.labels.items() if k != "Hostname"})
        times = []
        rows: list = []
        for _ in range(args.samples):
            time.sleep(args.interval)
            t0 = time.perf_counter()
            rows = sampler.sample()
            times.append(time.perf_counter() - t0)
        print(f"one sample of every device: {min(times) * 1000:.1f} ms (best of {len(times)})")
        for metric, labels, value in sorted(rows, key=lambda r: (r[0], r[1].get("gpu", ""))):
            extra = {k: labels[k] for k in ("gpu", "GPU_I_ID", "GPU_I_PROFILE", "pid", "container_id")
                     if k in labels}
            print(f"  {metric:36s} {value:12.3f}  {extra}")
        for note in sampler.notes:
            print("note:", note)
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used,power.draw,"
                              "temperature.gpu,clocks.sm", "--format=csv"], capture_output=True, text=True)
        print("peer nvidia-smi:\n" + out.stdout)
        _compare_memory(rows)
    with Store(":memory:") as st:
        cfg = nvml.CollectConfig(interval_ms=int(args.interval * 1000), duration_ms=int(args.interval * 3000))
        results = nvml.collect(st, cfg)
        print("collect():", [r.as_dict() for r in results])
        print(st.series().select("metric", "uuid", "hostname", "model", "mig_profile", "mig_id").head(20))
    return 0


def _compare_memory(rows: list) -> None:
    """Memory used and reserved per whole GPU: nvidia-smi (what dcgm-exporter agrees with) vs Tidelens."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used,memory.reserved",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True)
    ours = {(lab.get("gpu"), m): v for m, lab, v in rows if "GPU_I_ID" not in lab and "pid" not in lab}
    for line in out.stdout.strip().splitlines():
        try:
            idx, used, reserved = (x.strip() for x in line.split(","))
            smi_used, smi_res = float(used), float(reserved)
        except ValueError:
            print("nvidia-smi memory line not understood:", line)
            continue
        t_used = ours.get((idx, "DCGM_FI_DEV_FB_USED"))
        t_res = ours.get((idx, nvml.DCGM_FB_RESERVED))
        agree = t_used is not None and abs(t_used - smi_used) <= 2
        print(f"GPU {idx}: memory used nvidia-smi {smi_used:.0f} MiB, Tidelens {t_used} MiB; reserved "
              f"nvidia-smi {smi_res:.0f} MiB, Tidelens {t_res} MiB -> {'agree' if agree else 'DIFFER'}")


if __name__ == "__main__":
    raise SystemExit(main())
