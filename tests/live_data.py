"""A small, hand-checkable fleet for live-pull tests, and reference computations over it.

Two hosts, two hours at a 60 s scrape: a GPU that changes holder (and is unheld for a while),
a GPU time-sliced between two pods, a MIG-split GPU (one instance without a pod), an idle GPU,
a missed scrape, a vLLM histogram over two pods (one starting mid-way, one whose counters
reset), a success counter, an in-flight gauge and the HPA's desired replicas. Scrape labels
(``instance``, ``job``) are present, as a real scrape adds them.
"""

from __future__ import annotations

from analytics import signals as s

T0_MS = 1_767_571_200_000  # 2026-01-05T00:00:00Z, a Monday
SCRAPE_S = 60
STEPS = 120
STEP_MS = SCRAPE_S * 1000
END_MS = T0_MS + (STEPS - 1) * STEP_MS
SCRAPE = {"instance": "10.0.0.9:9400", "job": "dcgm"}
LES = ("0.1", "0.5", "2.5", "+Inf")

POD_TRAIN = "train-job-0"
POD_CHAT1 = "chat-vllm-6d9c7b5f4-x2k4q"
POD_CHAT2 = "chat-vllm-6d9c7b5f4-q7z5m"


def _dev(uuid: str, host: str, **extra: str) -> dict[str, str]:
    return {"UUID": uuid, "Hostname": host, "modelName": "NVIDIA H100 80GB HBM3", **SCRAPE, **extra}


def fleet_samples() -> list[tuple[str, dict[str, str], int, float]]:
    """Every sample of the fleet as ``(metric, labels, ts_ms, value)``."""
    out: list[tuple[str, dict[str, str], int, float]] = []

    def add(metric: str, labels: dict[str, str], i: int, value: float) -> None:
        out.append((metric, labels, T0_MS + i * STEP_MS, float(value)))

    for i in range(STEPS):
        # GPU-A: a training pod, then nobody, then a chat replica.
        if i < 60:
            holder = {"pod": POD_TRAIN, "namespace": "ml-training", "container": "trainer"}
        elif i < 80:
            holder = {}
        else:
            holder = {"pod": POD_CHAT2, "namespace": "inference", "container": "vllm"}
        a = _dev("GPU-a", "n1", gpu="0", **holder)
        add(s.DCGM_FB_USED, a, i, 1000 + i)
        add(s.DCGM_GPU_UTIL, a, i, (i * 7) % 100)
        add(s.DCGM_GR_ENGINE_ACTIVE, a, i, ((i * 7) % 100) / 100)
        # GPU-B: time-sliced between two notebooks, device values repeated per pod.
        for pod in ("dev-notebook-1", "dev-notebook-2"):
            b = _dev("GPU-b", "n1", gpu="1", pod=pod, namespace="dev", container="nb")
            if i == 30 and pod == "dev-notebook-2":
                continue  # a missed scrape
            add(s.DCGM_FB_USED, b, i, 500)
            add(s.DCGM_GPU_UTIL, b, i, 40)
            add(s.DCGM_GR_ENGINE_ACTIVE, b, i, 0.4)
        # GPU-c: MIG, a 3g.40gb instance serving chat, a 1g.10gb one without pod labels.
        c1 = _dev("GPU-c", "n2", gpu="0", GPU_I_PROFILE="3g.40gb", GPU_I_ID="1",
                  pod=POD_CHAT1, namespace="inference", container="vllm")
        c2 = _dev("GPU-c", "n2", gpu="0", GPU_I_PROFILE="1g.10gb", GPU_I_ID="2")
        for c, act in ((c1, 0.6), (c2, 0.1)):
            add(s.DCGM_FB_USED, c, i, 3000)
            add(s.DCGM_GR_ENGINE_ACTIVE, c, i, act)
        # GPU-d: idle, no pod.
        d = _dev("GPU-d", "n2", gpu="1")
        add(s.DCGM_FB_USED, d, i, 0)
        add(s.DCGM_GPU_UTIL, d, i, 0)
        add(s.DCGM_GR_ENGINE_ACTIVE, d, i, 0)

        # vLLM on two pods: pod 1 all along with a restart at step 70, pod 2 from step 40.
        for pod, since in ((POD_CHAT1, 0), (POD_CHAT2, 40)):
            if i < since:
                continue
            k = i - since if pod == POD_CHAT2 or i < 70 else i - 70
            base = {"pod": pod, "namespace": "inference", "model_name": "llama", **SCRAPE,
                    "job": "vllm"}
            fast, mid, slow, very = 3 * k, k, (k * k) // 20, k // 30
            cum = (fast, fast + mid, fast + mid + slow, fast + mid + slow + very)
            for le, v in zip(LES, cum):
                add(s.VLLM_TTFT + "_bucket", {**base, "le": le}, i, v)
            add(s.VLLM_TTFT + "_count", base, i, cum[-1])
            add(s.VLLM_TTFT + "_sum", base, i, 0.05 * fast + 0.3 * mid + 1.0 * slow + 5.0 * very)
            add(s.VLLM_SUCCESS, {**base, "finished_reason": "stop"}, i, cum[-1])
            add(s.VLLM_RUNNING, base, i, k % 5)
        add(s.KSM_HPA_DESIRED, {"namespace": "inference", "horizontalpodautoscaler": "chat-vllm",
                                "instance": "ksm:8080", "job": "ksm"}, i, 1 if i < 40 else 2)
    return out


def step_ends(start_ms: int = T0_MS, end_ms: int = END_MS) -> list[int]:
    return list(range(start_ms, end_ms + 1, STEP_MS))


def _last_in_step(samples, metric: str, t: int) -> dict[tuple, tuple[dict, float]]:
    """Per series of ``metric``: its last sample in ``(t - step, t]``."""
    out: dict[tuple, tuple[dict, float]] = {}
    for m, labels, ts, v in samples:
        if m == metric and t - STEP_MS < ts <= t:
            out[tuple(sorted(labels.items()))] = (labels, v)
    return out


HOLDER = ("namespace", "pod", "container", "Hostname", "modelName", "GPU_I_PROFILE")


def expected_holders(samples, t: int) -> dict[tuple, float]:
    """Reference: devices held per holder at step ``t`` (a time-sliced share counts 1/n)."""
    pairs: set[tuple[tuple, tuple]] = set()
    for metric in (s.DCGM_FB_USED, s.DCGM_GR_ENGINE_ACTIVE, s.DCGM_GPU_UTIL):
        for labels, _ in _last_in_step(samples, metric, t).values():
            holder = tuple((k, labels[k]) for k in HOLDER if labels.get(k))
            device = (labels["UUID"], labels.get("GPU_I_ID", ""))
            pairs.add((holder, device))
    per_device: dict[tuple, int] = {}
    for _, device in pairs:
        per_device[device] = per_device.get(device, 0) + 1
    out: dict[tuple, float] = {}
    for holder, device in pairs:
        out[holder] = out.get(holder, 0.0) + 1 / per_device[device]
    return out


def expected_bucket_increase(samples, t: int) -> dict[tuple, float]:
    """Reference: per (workload, le) the summed per-step increase of the TTFT buckets.

    The previous sample is looked for in the previous step only: the fleet misses no scrape
    of a histogram, so the pull's 5-minute reach back changes nothing here.
    """
    cur = _last_in_step(samples, s.VLLM_TTFT + "_bucket", t)
    prev = _last_in_step(samples, s.VLLM_TTFT + "_bucket", t - STEP_MS)
    out: dict[tuple, float] = {}
    for key, (labels, v) in cur.items():
        if key not in prev:
            continue  # a series' first sample is its baseline: nothing to add
        d = v - prev[key][1]
        inc = d if d >= 0 else v
        k = ("chat-vllm", labels["le"])
        out[k] = out.get(k, 0.0) + inc
    return out
