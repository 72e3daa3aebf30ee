"""Parameters of the pool what-if model: the service, the batch jobs, the pool, the scenario.

Every field carries help text and slider bounds in its metadata (``help``, ``min``, ``max``,
``step``, ``unit``), so the CLI and the What-if page build their controls from these
dataclasses instead of repeating them. Validation lives here too: a scenario that passes
``validate()`` is one the model can run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from analytics.errors import ConfigError
from analytics.fieldhelp import out_of_bounds
from analytics.times import step_start_ms, utc_hour


def _f(default: Any, help: str, *, min: float | None = None, max: float | None = None,
       step: float | None = None, unit: str = "", choices: tuple[str, ...] | None = None) -> Any:
    meta: dict[str, Any] = {"help": help, "unit": unit}
    if min is not None:
        meta["min"] = min
    if max is not None:
        meta["max"] = max
    if step is not None:
        meta["step"] = step
    if choices is not None:
        meta["choices"] = choices
    return field(default=default, metadata=meta)


# The longest SLO (and fixed response time) a what-if takes: an hour, for generation services
# whose responses take tens of seconds to minutes.
MAX_SLO_MS = 3_600_000.0


@dataclass(frozen=True)
class ServiceParams:
    """The inference service: how fast a slot serves, how the autoscaler behaves, its SLO."""

    team: str = _f("serving", "team that owns the inference service (its violations are its own "
                   "unless another team's workload caused them)")
    service_rate_per_slot_rps: float = _f(
        60.0, "requests per second one concurrency slot completes (1 / mean service time; "
        "an LLM slot held for a whole generation completes well under one a second)",
        min=0.001, max=10000.0, step=0.01, unit="req/s")
    concurrency: int = _f(8, "concurrent requests one replica serves (continuous-batching slots); "
                          "a replica is this many servers", min=1, max=512, step=1, unit="slots")
    gpus_per_replica: int = _f(1, "GPUs one replica needs", min=1, max=16, step=1, unit="GPUs")
    warmup_min: float = _f(6.0, "minutes from a replica getting its GPU to serving (weights, KV "
                           "cache, JIT kernels)", min=0.0, max=60.0, step=1.0, unit="min")
    slo_ms: float = _f(100.0, "latency SLO on p99 response time (up to an hour: an image "
                       "generator's 70 s is as valid as a recommender's 100 ms)", min=1.0,
                       max=MAX_SLO_MS, step=1.0, unit="ms")
    timeout_s: float = _f(10.0, "client timeout: a request waiting longer fails", min=0.1,
                          max=600.0, step=0.1, unit="s")
    cooldown_min: float = _f(10.0, "autoscaler scale-down stabilisation window", min=0.0,
                             max=120.0, step=1.0, unit="min")
    target_utilization: float = _f(0.6, "autoscaler target: slot utilization it scales to",
                                   min=0.05, max=1.0, step=0.01, unit="share")
    min_replicas: int = _f(1, "replicas the autoscaler never goes below", min=0, max=1000, step=1,
                           unit="replicas")
    model_memory_gib: float = _f(18.0, "GPU memory one replica needs (weights + KV cache); "
                                 "decides which MIG slices it fits", min=0.1, max=1000.0,
                                 step=0.5, unit="GiB")
    decode_heavy: bool = _f(True, "LLM decode-bound serving: speed scales with memory slices "
                            "(bandwidth), not compute slices, on MIG")
    service_cv: float = _f(1.0, "coefficient of variation of service time (1 = exponential, "
                           "M/M/c; other values scale the wait by (1+cv^2)/2, Allen-Cunneen; "
                           "below 1 the service is a constant plus a shorter exponential)",
                           min=0.0, max=5.0, step=0.05)
    latency_floor_ms: float = _f(0.0, "fixed time every response takes besides queueing and "
                                 "the slot's service (prefill, network, a first-token "
                                 "phase); added to the response time", min=0.0, max=MAX_SLO_MS,
                                 step=1.0, unit="ms")
    busy_slowdown: float = _f(0.0, "how much a response's fixed part (the floor and the "
                               "service's constant part) grows as slots fill: x (1 + this x "
                               "occupancy^4); continuous batching makes prefill share the GPU "
                               "with the decodes in flight", min=0.0, max=50.0, step=0.1,
                               unit="x")
    service_in_latency: bool = _f(True, "the latency the SLO is on includes the slot's service "
                                  "time; false for time to first token (the slot goes on "
                                  "decoding after it): then only waiting and the floor count")
    max_replicas: int = _f(10000, "replicas the autoscaler never goes above (its maximum): "
                           "a surge beyond it queues however many GPUs are free", min=1,
                           max=100000, step=1, unit="replicas")
    p99_noise_log_sd: float = _f(0.0, "how a step's p99 reading scatters around the model's "
                                 "(standard deviation of log(read / modelled)): a step counts "
                                 "as a violation minute with the chance its reading would be "
                                 "over the SLO; 0 calls each step by the model's p99 alone",
                                 min=0.0, max=1.0, step=0.01, unit="log sd")


@dataclass(frozen=True)
class BatchJob:
    """One batch workload (a fine-tune, a training run); ``daily`` repeats it every day."""

    name: str = _f("finetune", "job name")
    team: str = _f("ml-research", "team charged for violations this job causes")
    gpus: int = _f(48, "GPUs the job asks for (gang: it runs only with all of them)", min=1,
                   max=100000, step=1, unit="GPUs")
    start_hour: float = _f(2.0, "hour of day the job is submitted (UTC)", min=0.0, max=23.99,
                           step=0.25, unit="h")
    duration_h: float = _f(8.0, "hours of work on all its GPUs, without interruptions", min=0.0,
                           max=10000.0, step=0.25, unit="h")
    daily: bool = _f(True, "submitted again every day")
    arrival_ms: int = _f(-1, "a run that happened: when it arrived (UTC epoch ms, the end of the first "
                         "step it held GPUs); -1 = submitted at start_hour (every day when daily)",
                         min=-1, max=2**62, step=1, unit="ms")
    checkpoint_cost_min: float = _f(3.0, "minutes one checkpoint stalls the job", min=0.0,
                                    max=120.0, step=0.5, unit="min")
    checkpoint_interval_min: float = _f(
        0.0, "minutes between checkpoints; 0 = Young/Daly sqrt(2 d M) - d with M from a first "
        "pass (no checkpoints when nothing interrupts the job)", min=0.0, max=10000.0, step=1.0,
        unit="min")
    restore_min: float = _f(5.0, "minutes to reload state after an interruption", min=0.0,
                            max=240.0, step=0.5, unit="min")
    eviction_delay_min: float = _f(2.0, "minutes between eviction and the GPUs being free "
                                   "(graceful termination)", min=0.0, max=120.0, step=0.5,
                                   unit="min")


@dataclass(frozen=True)
class BatchParams:
    """The batch workloads sharing (or not) the pool."""

    jobs: tuple[BatchJob, ...] = field(default_factory=lambda: (BatchJob(),),
                                       metadata={"help": "batch jobs in the pool"})


@dataclass(frozen=True)
class PoolParams:
    """The GPU pool: size, model, prices, and each policy's knobs."""

    gpus: int = _f(64, "GPUs in the pool", min=1, max=100000, step=1, unit="GPUs")
    gpu_model: str = _f("A100-80GB", "GPU model (decides the MIG profiles)", unit="",
                        choices=("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"))
    price_reserved_per_gpu_h: float = _f(2.0, "reserved (committed) price", min=0.0, max=100.0,
                                         step=0.05, unit="$/GPU-h")
    price_on_demand_per_gpu_h: float = _f(4.0, "on-demand price", min=0.0, max=100.0, step=0.05,
                                          unit="$/GPU-h")
    price_spot_per_gpu_h: float = _f(1.2, "spot / interruptible price", min=0.0, max=100.0,
                                     step=0.05, unit="$/GPU-h")
    reservation_gpus: int = _f(-1, "GPUs the inference class owns and batch never touches: class A "
                               "of the partitioned pool and of the three-pool plan, the GPUs MIG "
                               "splits for inference; -1 = what the peak needed (the autoscaler's "
                               "desired replicas at peak traffic x GPUs per replica) plus the "
                               "headroom", min=-1, max=100000, step=1, unit="GPUs")
    headroom: float = _f(0.3, "share above the peak need an automatic reservation keeps (0.3 = 30% "
                         "more GPUs than the peak needed)", min=0.0, max=5.0, step=0.05, unit="share")
    split_b: float = _f(0.1, "partitioned: soft-shared share (class B, time-sliced with "
                        "low-criticality work; inference overflow runs there slowed)", min=0.0,
                        max=1.0, step=0.01, unit="share")
    mig_profile: str = _f("auto", "MIG profile for inference slices; 'auto' = the smallest that "
                          "fits the model and keeps service time within half the SLO")
    mig_resplit_drain_min: float = _f(10.0, "minutes a GPU is drained when re-split at a tidal "
                                      "boundary", min=0.0, max=120.0, step=1.0, unit="min")
    timeslice_interference: float = _f(0.6, "time-slicing: extra service time while batch "
                                       "shares the GPU (0.6 = 60% slower)", min=0.0, max=5.0,
                                       step=0.05, unit="share")
    timeslice_replicas: int = _f(2, "time-slicing: pods sharing one GPU (the NVIDIA device plugin's "
                                 "sharing.timeSlicing replicas); each pod beyond the first adds the "
                                 "interference again", min=2, max=16, step=1, unit="pods")
    checkpoint_interval_min: float = _f(-1.0, "minutes between checkpoints for every batch job; -1 = each job's "
                               "own, 0 = Young/Daly from the interruptions", min=-1.0, max=10000.0,
                               step=1.0, unit="min")
    tidal_start_hour: float = _f(22.0, "tidal window start: batch admitted in [start, end)",
                                 min=0.0, max=23.99, step=0.25, unit="h")
    tidal_end_hour: float = _f(8.0, "tidal window end: batch drained by then (may cross "
                               "midnight)", min=0.0, max=23.99, step=0.25, unit="h")
    polite_release_hour: float = _f(9.0, "polite batch: hour it releases its GPUs", min=0.0,
                                    max=23.99, step=0.25, unit="h")
    spot_interruptions_per_h: float = _f(0.05, "partitioned: interruptions per hour of a spot "
                                         "(class C) job", min=0.0, max=10.0, step=0.01,
                                         unit="1/h")
    violation_price_per_min: float = _f(50.0, "price of one SLO-violation minute, charged to the "
                                        "team that caused it", min=0.0, max=100000.0, step=1.0,
                                        unit="$/min")
    seed: int = _f(7, "random seed (spot interruptions, bursts)", min=0, max=2**31 - 1, step=1)


@dataclass
class PoolScenario:
    """One demand and one pool: what every policy replays.

    ``traffic_rps`` is the request rate per step (the step is ``step_s``, 60 by default);
    ``others_gpus`` the GPUs of the pool that other services and unmodelled work hold at each
    step, as observed (``None``: nothing else; every policy leaves them where they were);
    ``start_ts_ms`` is the end of the first step (UTC epoch ms), so step i covers
    (start + (i-1) step, start + i step]. ``provenance`` says where each parameter came from
    (``preset``, ``store:<query>``, ``user``).
    """

    traffic_rps: np.ndarray
    others_gpus: np.ndarray | None = None
    start_ts_ms: int = 0
    step_s: int = 60
    service: ServiceParams = field(default_factory=ServiceParams)
    batch: BatchParams = field(default_factory=BatchParams)
    pool: PoolParams = field(default_factory=PoolParams)
    name: str = "custom"
    description: str = ""
    provenance: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.traffic_rps = np.asarray(self.traffic_rps, dtype=np.float64)
        if self.others_gpus is not None:
            self.others_gpus = np.asarray(self.others_gpus, dtype=np.float64)

    def fingerprint(self) -> str:
        """A digest of everything a replay reads (demand, step, parameters, batch jobs): equal
        digests replay to equal results, so a page may keep one replay for both.

        >>> a = PoolScenario(traffic_rps=[1.0, 2.0])
        >>> a.fingerprint() == PoolScenario(traffic_rps=[1.0, 2.0], provenance={"x": "y"}).fingerprint()
        True
        >>> a.fingerprint() == PoolScenario(traffic_rps=[1.0, 2.5]).fingerprint()
        False
        """
        import hashlib

        h = hashlib.sha1(self.traffic_rps.tobytes())
        h.update(b"-" if self.others_gpus is None else self.others_gpus.tobytes())
        h.update(repr((self.start_ts_ms, self.step_s, self.service, self.batch, self.pool)).encode())
        return h.hexdigest()

    def modelled_service(self) -> str:
        """The service the scenario models: ``store:<service>`` for a calibrated one, else its
        name (a preset's or a saved file's one service).

        >>> PoolScenario(traffic_rps=[1.0], name="store:chat-vllm").modelled_service()
        'chat-vllm'
        """
        return self.name.split(":", 1)[1] if self.name.startswith("store:") else self.name

    def others(self) -> np.ndarray:
        """GPUs held by others at each step (zeros when the scenario has none)."""
        if self.others_gpus is None:
            return np.zeros(self.steps)
        return self.others_gpus

    @property
    def steps(self) -> int:
        return int(self.traffic_rps.shape[0])

    @property
    def step_h(self) -> float:
        return self.step_s / 3600.0

    def hour_of_day(self) -> np.ndarray:
        """Hour of day (UTC, float) at the start of each step."""
        return utc_hour(step_start_ms(self.ts_ms(), self.step_s * 1000))

    def ts_ms(self) -> np.ndarray:
        """End of each step, UTC epoch milliseconds."""
        return self.start_ts_ms + np.arange(self.steps, dtype=np.int64) * self.step_s * 1000

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the first parameter outside its range."""
        tr = self.traffic_rps
        if tr.ndim != 1 or tr.shape[0] < 2:
            raise ConfigError(f"scenario '{self.name}': traffic_rps needs at least 2 steps; "
                              "give one request rate per step")
        if not np.all(np.isfinite(tr)) or np.any(tr < 0):
            raise ConfigError(f"scenario '{self.name}': traffic_rps has negative or missing "
                              "values; fill gaps before modelling")
        if self.step_s <= 0 or 3600 % self.step_s:
            raise ConfigError(f"scenario '{self.name}': step_s={self.step_s} must divide an hour")
        for part in (self.service, self.pool, *self.batch.jobs):
            _check_ranges(part, self.name)
        if self.service.max_replicas < self.service.min_replicas:
            raise ConfigError(f"scenario '{self.name}': service.max_replicas="
                              f"{self.service.max_replicas} is below service.min_replicas="
                              f"{self.service.min_replicas}; raise the maximum or lower the "
                              "minimum")
        names = [j.name for j in self.batch.jobs]
        dup = sorted({x for x in names if names.count(x) > 1})
        if dup:
            raise ConfigError(f"scenario '{self.name}': batch job name(s) {', '.join(dup)} "
                              "used twice; give each job its own name")
        if self.others_gpus is not None:
            o = self.others_gpus
            if o.shape != tr.shape or not np.all(np.isfinite(o)) or np.any(o < 0):
                raise ConfigError(f"scenario '{self.name}': others_gpus needs one non-negative value per "
                                  f"step of traffic_rps ({tr.shape[0]}), got {o.shape[0]}")
        if self.pool.reservation_gpus > self.pool.gpus:
            raise ConfigError(f"scenario '{self.name}': pool.reservation_gpus={self.pool.reservation_gpus} "
                              f"is more than the pool's {self.pool.gpus} GPUs; lower it or -1 for "
                              "what the peak needed")
        b_gpus = round(self.pool.split_b * self.pool.gpus)
        if self.pool.reservation_gpus >= 0 and self.pool.reservation_gpus + b_gpus > self.pool.gpus:
            raise ConfigError(f"scenario '{self.name}': pool.reservation_gpus ({self.pool.reservation_gpus}) "
                              f"+ the soft-shared class B ({b_gpus} GPUs of pool.split_b) exceed the pool's "
                              f"{self.pool.gpus} GPUs; class C gets the rest, lower one of them")


def _check_ranges(obj: Any, scenario: str) -> None:
    for f in fields(obj):
        v, choices = getattr(obj, f.name), f.metadata.get("choices")
        if choices and (isinstance(v, bool) or not isinstance(v, (int, float))) and v not in choices:
            raise ConfigError(f"scenario '{scenario}': {type(obj).__name__}.{f.name}="
                              f"{v!r}; choose one of {', '.join(choices)}")
    for f, v in out_of_bounds(obj):
        raise ConfigError(f"scenario '{scenario}': {type(obj).__name__}.{f.name}={v} is "
                          f"outside [{f.metadata.get('min')}, {f.metadata.get('max')}]; {f.metadata.get('help', '')}")


def field_specs(cls: type) -> list[dict[str, Any]]:
    """What a form needs per parameter of ``cls``: name, type, default, help and bounds.

    The What-if page and the CLI build their controls from this, so a new parameter
    appears everywhere once it is declared here.
    """
    out: list[dict[str, Any]] = []
    for f in fields(cls):
        default = f.default
        spec = {"name": f.name, "type": type(default).__name__ if default is not None
                else "object", "default": default}
        spec.update(f.metadata)
        out.append(spec)
    return out
