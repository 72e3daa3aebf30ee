"""MIG profiles per GPU model, and the slice an inference replica runs on.

A profile has compute slices (of 7) and memory slices (of 8). Only some combinations of
profiles fit on one GPU ("valid placements"); the tables keep the common ones from NVIDIA's
MIG user guide (homogeneous splits and the usual mixed ones). A model fits a slice when its
memory does; decode-heavy LLM serving is memory-bandwidth bound and so runs at the memory
share of the GPU, other serving at the compute share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analytics.errors import ConfigError


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile: ``name`` like ``3g.40gb``; ``max_instances`` per GPU."""

    name: str
    compute_slices: int  # of 7
    memory_slices: int  # of 8
    memory_gb: float
    max_instances: int

    def speed(self, decode_heavy: bool) -> float:
        """Throughput of one instance relative to the whole GPU."""
        return self.memory_slices / 8.0 if decode_heavy else self.compute_slices / 7.0


def _table(sizes: tuple[float, float, float, float, float, float]) -> tuple[MigProfile, ...]:
    m1, m2, m2c, m3, m4, m7 = sizes

    def n(gb: float) -> str:
        return f"{gb:g}gb"

    return (
        MigProfile(f"1g.{n(m1)}", 1, 1, m1, 7),
        MigProfile(f"1g.{n(m2)}", 1, 2, m2, 4),
        MigProfile(f"2g.{n(m2c)}", 2, 2, m2c, 3),
        MigProfile(f"3g.{n(m3)}", 3, 4, m3, 2),
        MigProfile(f"4g.{n(m4)}", 4, 4, m4, 1),
        MigProfile(f"7g.{n(m7)}", 7, 8, m7, 1),
    )


# Per GPU model: the profiles (NVIDIA MIG user guide, "Supported MIG Profiles").
MIG_PROFILES: dict[str, tuple[MigProfile, ...]] = {
    "A100-40GB": _table((5, 10, 10, 20, 20, 40)),
    "A100-80GB": _table((10, 20, 20, 40, 40, 80)),
    "H100-80GB": _table((10, 20, 20, 40, 40, 80)),
    "H200-141GB": _table((18, 35, 35, 71, 71, 141)),
}

# Valid placements, by compute-slice pattern (the same on every model above): each tuple is
# the profiles' compute/memory pattern as (compute, memory) pairs placed on one GPU.
VALID_PLACEMENTS: tuple[tuple[tuple[int, int], ...], ...] = (
    ((7, 8),),
    ((4, 4), (3, 4)),
    ((4, 4), (2, 2), (1, 1)),
    ((4, 4), (1, 1), (1, 1), (1, 1)),
    ((3, 4), (3, 4)),
    ((3, 4), (2, 2), (1, 1)),
    ((3, 4), (1, 1), (1, 1), (1, 1)),
    ((2, 2), (2, 2), (2, 2), (1, 1)),
    ((2, 2), (2, 2), (1, 1), (1, 1), (1, 1)),
    ((1, 2), (1, 2), (1, 2), (1, 2)),
    ((1, 1),) * 7,
)


def placements(gpu_model: str) -> list[tuple[str, ...]]:
    """Valid placements on ``gpu_model`` as tuples of profile names."""
    profiles = profiles_for(gpu_model)
    by_shape = {(p.compute_slices, p.memory_slices): p.name for p in profiles}
    return [tuple(by_shape[s] for s in pl) for pl in VALID_PLACEMENTS]


def profiles_for(gpu_model: str) -> tuple[MigProfile, ...]:
    try:
        return MIG_PROFILES[gpu_model]
    except KeyError:
        raise ConfigError(f"pool.gpu_model={gpu_model!r} has no MIG table; choose one of "
                          f"{', '.join(MIG_PROFILES)}") from None


@dataclass(frozen=True)
class MigLayout:
    """How inference GPUs are split: ``instances`` of ``profile`` per GPU (a valid placement)."""

    profile: MigProfile
    instances: int
    speed: float  # throughput of one instance relative to a whole GPU

    @property
    def gpu_share(self) -> float:
        """Share of a GPU one instance counts as (compute slices / 7)."""
        return self.profile.compute_slices / 7.0


def choose_layout(gpu_model: str, model_memory_gib: float, decode_heavy: bool,
                  service_rate_per_slot_rps: float, slo_ms: float, profile: str = "auto",
                  *, latency_floor_ms: float = 0.0, service_in_latency: bool = True,
                  peak_replicas: float | None = None) -> MigLayout:
    """The MIG layout inference runs on.

    ``auto`` keeps the profiles the model fits in whose unqueued p99 (the latency floor
    plus, when the service is in the measured latency, ln 100 / rate on the slice) is within
    half the SLO. Of those it takes the one that serves the peak with the fewest GPUs, given
    ``peak_replicas`` (replicas on whole GPUs the peak needs): a slice's throughput per GPU
    (instances x speed) differs between profiles, e.g. 4 x 1g.20gb give a compute-bound
    service 4/7 of a GPU, so the smallest slice can need nearly twice the GPUs. Ties, and
    every case without ``peak_replicas``, go to the smallest profile (finer scaling). When
    none is within half the SLO, the largest. A named profile must fit the model.
    """
    profiles = profiles_for(gpu_model)
    if profile != "auto":
        match = [p for p in profiles if p.name == profile]
        if not match:
            raise ConfigError(f"pool.mig_profile={profile!r} is not a {gpu_model} profile; "
                              f"choose one of {', '.join(p.name for p in profiles)} or 'auto'")
        p = match[0]
        if model_memory_gib > p.memory_gb:
            raise ConfigError(f"pool.mig_profile={profile!r}: the model needs "
                              f"{model_memory_gib:g} GiB but the slice has {p.memory_gb:g} GB; "
                              "choose a larger profile or 'auto'")
        return MigLayout(p, p.max_instances, p.speed(decode_heavy))
    fitting = [p for p in profiles if p.memory_gb >= model_memory_gib]
    if not fitting:
        raise ConfigError(f"service.model_memory_gib={model_memory_gib:g} does not fit a whole "
                          f"{gpu_model}; MIG cannot host this model")
    fast = []
    for p in sorted(fitting, key=lambda q: (q.compute_slices, q.memory_slices)):
        p99_service_ms = 1000.0 * np.log(100.0) / (service_rate_per_slot_rps
                                                   * p.speed(decode_heavy))
        if latency_floor_ms + (p99_service_ms if service_in_latency else 0.0) <= 0.5 * slo_ms:
            fast.append(p)
    if fast:
        p = fast[0]
        if peak_replicas is not None and peak_replicas > 0:
            # min() keeps the first (smallest) of equals.
            p = min(fast, key=lambda q: gpus_for_peak(q, decode_heavy, peak_replicas))
        return MigLayout(p, p.max_instances, p.speed(decode_heavy))
    p = max(fitting, key=lambda q: q.compute_slices)
    return MigLayout(p, p.max_instances, p.speed(decode_heavy))


def gpus_for_peak(profile: MigProfile, decode_heavy: bool, peak_replicas: float) -> int:
    """GPUs split into ``profile`` that serve ``peak_replicas`` whole-GPU replicas' load."""
    instances = math.ceil(peak_replicas / profile.speed(decode_heavy) - 1e-9)
    return int(math.ceil(instances / profile.max_instances - 1e-9))
