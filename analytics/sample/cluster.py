"""The simulated cluster: configuration dataclasses (with help text) and the GPU topology.

Every knob of the simulator lives here, as a dataclass field whose ``metadata["help"]`` the
CLI and the app's sliders reuse. The topology (nodes, GPUs, UUIDs, the MIG-split GPUs and the
time-sliced GPU) is derived deterministically from the GPU count, never drawn at random.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from analytics.errors import ConfigError

GPUS_PER_NODE = 8
GPU_MODEL = "NVIDIA H100 80GB HBM3"


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class ServiceConfig:
    """One inference service: its traffic, its replicas, its latency mechanics and its SLO."""

    name: str = field(metadata=_help("service (Deployment and HPA) name"))
    namespace: str = field(metadata=_help("Kubernetes namespace of its pods"))
    kind: str = field(metadata=_help("'vllm' (LLM, TTFT histograms) or 'http' (generic request histogram)"))
    peak_rps: float = field(metadata=_help("weekday daytime request rate, requests per second"))
    trough_ratio: float = field(default=0.15, metadata=_help("overnight traffic as a share of the daytime peak"))
    weekend_ratio: float = field(default=0.6, metadata=_help("weekend daytime traffic as a share of weekdays"))
    noise_sigma: float = field(default=0.06, metadata=_help("sd of the multiplicative AR(1) traffic noise (log scale)"))
    concurrency: int = field(default=32, metadata=_help("requests one replica serves at once (continuous-batching slots)"))
    hold_s: float = field(default=6.0, metadata=_help("mean time a request holds a slot, seconds"))
    service_median_s: float = field(default=0.08, metadata=_help("median latency of the measured phase (prefill for LLM TTFT, whole request for http) on an idle replica, seconds"))
    service_sigma: float = field(default=0.55, metadata=_help("log-normal sigma of that latency"))
    slowdown: float = field(default=6.0, metadata=_help("latency inflation at full slot occupancy: x (1 + slowdown * occupancy^4); prefill shares the GPU with decode"))
    decode_median_s: float = field(default=5.0, metadata=_help("LLM only: median decode time after the first token, seconds"))
    decode_sigma: float = field(default=0.6, metadata=_help("LLM only: log-normal sigma of the decode time (narrow when completions are capped short)"))
    decode_slowdown: float = field(default=0.0, metadata=_help("LLM only: extra decode inflation at full slot occupancy: x (1 + 0.5 * occupancy + decode_slowdown * occupancy^4); a full batch slows every token"))
    target_util: float = field(default=0.6, metadata=_help("HPA target: share of a replica's slot capacity the autoscaler aims for"))
    min_replicas: int = field(default=2, metadata=_help("HPA minimum replicas"))
    max_replicas: int = field(default=16, metadata=_help("HPA maximum replicas"))
    warmup_min: int = field(default=6, metadata=_help("minutes from a GPU being bound to the replica serving (weights, KV cache, kernels)"))
    warmup_max_min: int = field(default=0, metadata=_help("above warmup_min: each replica's warm-up is drawn from warmup_min to this many minutes (a model loading at the speed of the node's disk and network)"))
    cooldown_min: int = field(default=10, metadata=_help("HPA scale-down stabilisation window, minutes"))
    patience_s: float = field(default=30.0, metadata=_help("clients abandon after waiting this long; caps the carried backlog"))
    slo_p99_ms: float = field(default=1500.0, metadata=_help("p99 latency objective, milliseconds (TTFT for LLMs)"))
    fb_used_mib: int = field(default=72000, metadata=_help("GPU memory a serving replica holds, MiB"))
    team: str = field(default="", metadata=_help("owning team (default: the namespace)"))
    model_name: str = field(default="", metadata=_help("LLM only: the model_name label"))
    slo_latency: str = field(default="main", metadata=_help("which latency the SLO (and the truth's p99) is on: 'main' (TTFT for LLMs, the request for http) or 'e2e' (LLM end-to-end)"))
    gpus_per_replica: int = field(default=1, metadata=_help("GPUs one replica binds at once, all on one node (tensor parallelism)"))

    @property
    def capacity_rps(self) -> float:
        """Requests per second one replica completes with all slots busy."""
        return self.concurrency / self.hold_s


@dataclass(frozen=True)
class BatchConfig:
    """Batch work admitted onto free GPUs by Kueue: the nightly fine-tune and ad-hoc jobs."""

    finetune: bool = field(default=True, metadata=_help("run the nightly fine-tune"))
    finetune_hour_utc: float = field(default=2.0, metadata=_help("submission hour of the nightly fine-tune, UTC"))
    finetune_weekday_prob: float = field(default=0.85, metadata=_help("chance the fine-tune runs on a given weekday night (never on weekends)"))
    finetune_hours: tuple[float, float] = field(default=(8.0, 9.0), metadata=_help("range of fine-tune run times, hours"))
    finetune_max_gpus: int = field(default=48, metadata=_help("most GPUs the fine-tune takes"))
    finetune_leave_free: int = field(default=6, metadata=_help("GPUs the elastic fine-tune leaves free when admitted"))
    finetune_drift_h_per_day: float = field(default=0.0, metadata=_help(
        "each day from finetune_drift_from_day the fine-tune runs this many hours longer than the day before "
        "(its length drifts; 0 = no drift)"))
    finetune_drift_from_day: int = field(default=0, metadata=_help("the day (0 = the first) the fine-tune's drift starts"))
    jobs_per_day: float = field(default=3.0, metadata=_help("mean number of other training/eval jobs submitted per day"))
    job_gpus: tuple[int, ...] = field(default=(1, 2, 4), metadata=_help("GPU counts other jobs ask for"))
    job_hours: tuple[float, float] = field(default=(1.0, 5.0), metadata=_help("range of other jobs' run times, hours"))
    job_submit_hours: tuple[float, float] = field(default=(9.0, 21.0), metadata=_help("range of hours (UTC) other jobs are submitted in"))
    queue: str = field(default="training", metadata=_help("Kueue ClusterQueue of batch work"))


@dataclass(frozen=True)
class SurgeConfig:
    """Genuine traffic surges: traffic well above the norm on some days."""

    days: int = field(default=4, metadata=_help("number of days (of 21) with a surge"))
    factor: tuple[float, float] = field(default=(2.0, 2.8), metadata=_help("range of surge multipliers on the normal traffic"))
    minutes: tuple[int, int] = field(default=(30, 90), metadata=_help("range of surge durations, minutes"))
    hours_utc: tuple[float, float] = field(default=(12.0, 19.0), metadata=_help("range of surge start hours, UTC"))
    morning_days: int = field(default=0, metadata=_help("of those days, how many put the surge on the morning ramp (09:00-10:30)"))
    ramp_offset_min: tuple[float, float] = field(default=(0.0, 60.0), metadata=_help("range of minutes after the ramp starts that a morning surge starts"))
    rise_min: int = field(default=3, metadata=_help("minutes a surge takes to reach its full factor"))
    weekly: bool = field(default=False, metadata=_help(
        "the first week's surges recur every week, the same weekday, hour, size and length (a weekly campaign)"))


@dataclass(frozen=True)
class FaultConfig:
    """Degraded replicas: a serving pod that answers slowly (a throttled or failing GPU) for a while."""

    nights: int = field(default=0, metadata=_help("number of nights (of 21) on which one replica of the first service is degraded"))
    hours_utc: tuple[float, float] = field(default=(0.5, 5.0), metadata=_help("range of hours (UTC) a degradation starts in"))
    minutes: tuple[int, int] = field(default=(25, 60), metadata=_help("range of degradation durations, minutes"))
    slowdown: float = field(default=8.0, metadata=_help("the degraded replica's measured phase (prefill, or the whole http request) takes this x longer"))


POOL_CHANGE_POLICIES = ("partitioned", "tidal")


@dataclass(frozen=True)
class PoolChange:
    """The day the pool stops being shared: from that midnight (UTC) on, one policy rules.

    ``partitioned``: ``reserved_gpus`` general GPUs are inference's and batch is never admitted
    onto them (a GPU batch holds at the change keeps it until its job ends). ``tidal``: batch is
    admitted only inside ``tidal_hours`` [start, end) and every batch job still running at the
    end hour is drained (evicted, its GPUs freed).
    """

    day: int = field(default=7, metadata=_help("day of the run (0 = the first) at whose midnight the policy changes"))
    policy: str = field(default="partitioned", metadata=_help("the policy from that day: 'partitioned' or 'tidal'"))
    reserved_gpus: int = field(default=28, metadata=_help("partitioned: general GPUs reserved for inference"))
    tidal_hours: tuple[float, float] = field(default=(20.0, 8.0), metadata=_help(
        "tidal: the window batch is admitted in, [start, end) hours UTC (crossing midnight); drained at its end"))
    weekly_surges: bool = field(default=False, metadata=_help(
        "the surges recur every week alike (SurgeConfig.weekly), so the weeks either side of the change "
        "differ only by the policy: the case that scores the what-if's prediction, not the week's luck"))

    def validate(self, days: int) -> None:
        """Raise ConfigError for a policy the simulator has no rules for or a day outside the run."""
        if self.policy not in POOL_CHANGE_POLICIES:
            raise ConfigError(f"pool change policy {self.policy!r}: use one of {', '.join(POOL_CHANGE_POLICIES)}")
        if not 1 <= self.day < days:
            raise ConfigError(f"pool change on day {self.day}: give a day from 1 to {days - 1} (the run has {days})")
        if self.policy == "partitioned" and self.reserved_gpus < 1:
            raise ConfigError(f"pool change reserved_gpus {self.reserved_gpus}: reserve at least 1 GPU")


@dataclass(frozen=True)
class ScenarioConfig:
    """A named story: services, batch, surges and pool policy."""

    name: str = field(metadata=_help("scenario name"))
    description: str = field(metadata=_help("what the scenario shows"))
    services: tuple[ServiceConfig, ...] = field(metadata=_help("inference services sharing the pool"))
    batch: BatchConfig = field(default_factory=BatchConfig, metadata=_help("batch work"))
    surges: SurgeConfig = field(default_factory=SurgeConfig, metadata=_help("traffic surges"))
    faults: FaultConfig = field(default_factory=FaultConfig, metadata=_help("degraded replicas (none by default)"))
    inference_reserved_gpus: int = field(default=0, metadata=_help("GPUs reserved for inference that batch never touches (0 = one shared pool)"))
    ramp_hour_utc: float = field(default=9.0, metadata=_help("hour the weekday morning ramp starts, UTC (it reaches the peak ~30 min later)"))
    traffic: str = field(default="synthetic", metadata=_help("'synthetic' daily/weekly rhythm or 'servegen' (the bundled production trace)"))
    start_iso: str = field(default="2026-10-05T00:00:00Z", metadata=_help("first sample, ISO with its zone offset: the cluster's local midnight on a Monday (the scenario's '_utc' hours are hours of that zone's day, UTC when the offset is Z)"))
    scrape_s: int = field(default=60, metadata=_help("scrape interval, seconds"))
    min_event_min: int = field(default=5, metadata=_help("truth: shortest tail event, minutes"))
    merge_gap_min: int = field(default=10, metadata=_help("truth: SLO breaches closer than this merge into one event, minutes"))
    change: PoolChange | None = field(default=None, metadata=_help("the day the shared pool changes policy (None: shared throughout, or as inference_reserved_gpus says)"))


# --- topology ------------------------------------------------------------------------------

# MIG layouts of the split GPUs (valid H100 80GB placements): (profile, GPU instance id).
MIG_LAYOUTS: tuple[tuple[tuple[str, int], ...], ...] = (
    (("3g.40gb", 1), ("3g.40gb", 2)),
    (("4g.40gb", 0), ("2g.20gb", 3), ("1g.10gb", 9)),
)


def mig_compute_slices(profile: str) -> int:
    """Compute slices (of 7) of a MIG profile such as ``3g.40gb``."""
    return int(profile.split("g.", 1)[0])


@dataclass(frozen=True)
class Gpu:
    """One physical GPU of the pool."""

    index: int  # pool-wide index
    node: str
    minor: int  # the ``gpu`` label, per node
    uuid: str
    pci_bus_id: str
    role: str  # general | mig | timeslice
    mig: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Topology:
    """Nodes and GPUs; which are MIG-split, time-sliced, or general (schedulable whole)."""

    gpus: tuple[Gpu, ...]
    nodes: tuple[str, ...]

    @property
    def general(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus if g.role == "general")


def _uuid(node: str, minor: int) -> str:
    h = hashlib.sha256(f"tidelens-sample/{node}/{minor}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def build_topology(gpus: int) -> Topology:
    """Nodes of 8 GPUs; on the last node two GPUs are MIG-split and one is time-sliced.

    Raises
    ------
    ConfigError
        If ``gpus`` is not a multiple of 8 of at least 16.
    """
    if gpus < 16 or gpus % GPUS_PER_NODE:
        raise ConfigError(f"--gpus {gpus}: the sample needs a multiple of {GPUS_PER_NODE} GPUs, at least 16")
    n_nodes = gpus // GPUS_PER_NODE
    nodes = tuple(f"gpu-node-{i:02d}" for i in range(n_nodes))
    out = []
    for n, node in enumerate(nodes):
        for minor in range(GPUS_PER_NODE):
            role, mig = "general", ()
            if n == n_nodes - 1 and minor < len(MIG_LAYOUTS):
                role, mig = "mig", MIG_LAYOUTS[minor]
            elif n == n_nodes - 1 and minor == len(MIG_LAYOUTS):
                role = "timeslice"
            out.append(Gpu(index=len(out), node=node, minor=minor, uuid=_uuid(node, minor),
                           pci_bus_id=f"00000000:{0x18 + 0x10 * minor:02X}:00.0", role=role, mig=mig))
    return Topology(gpus=tuple(out), nodes=nodes)
