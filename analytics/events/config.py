"""Settings of tail-event detection and attribution, shared by the CLI, the page and the report.

Every threshold the attribution uses lives here with its help text, so the CLI flags, the
page's widgets and the report's "method" section all say the same thing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from analytics.errors import ConfigError
from analytics.timeline.config import TimelineConfig

CAUSES: tuple[str, ...] = ("batch_contention", "traffic_surge", "scaling_lag", "mixed", "unexplained")
SHARE_KEYS: tuple[str, ...] = ("batch_contention", "traffic_surge", "unexplained")


@dataclass
class EventsConfig:
    """How tail events are found and attributed (see :mod:`analytics.events`)."""

    step_s: int = field(default=60, metadata={"help": "timeline step in seconds"})
    start_ms: int | None = field(default=None, metadata={"help": "analysed range start (UTC epoch ms); None = first data"})
    end_ms: int | None = field(default=None, metadata={"help": "analysed range end (UTC epoch ms); None = last data"})
    min_duration_min: float = field(default=5.0, metadata={
        "help": "an event lasts at least this many minutes above the SLO"})
    merge_gap_min: float = field(default=10.0, metadata={
        "help": "runs above the SLO separated by a gap shorter than this many minutes are one event"})
    relative_k: float = field(default=3.0, metadata={
        "help": "services without an SLO: p99 above k x the latency expected at the capacity the autoscaler wanted"})
    mixed_share: float = field(default=0.3, metadata={
        "help": "a share is material at this or above: cause is 'mixed' when both batch and traffic shares are "
                "(a surge during contention), and 'scaling_lag' only when neither is"})
    compound_share: float = field(default=0.15, metadata={
        "help": "with a surge in the event (traffic above its norm band for at least min_duration_min in a row), "
                "a share is material at this or above: cause is 'mixed' when both batch and traffic shares are "
                "(a surge inside batch contention, whose contention outlasts it)"})
    explained_share: float = field(default=0.5, metadata={
        "help": "cause is 'unexplained' when batch + traffic shares are below this"})
    warmup_min: float | None = field(default=None, metadata={
        "help": "minutes a new replica needs before it serves; None = measured from the data"})
    default_warmup_min: float = field(default=5.0, metadata={
        "help": "warm-up used when the data shows no scale-up to measure it on"})
    reaction_min: float = field(default=1.0, metadata={
        "help": "minutes an autoscaler takes to react to traffic, added to the warm-up where the desired replicas "
                "are inferred from traffic (a linked autoscaler's desired replicas carry its own reaction)"})
    surge_steps_share: float = field(default=0.25, metadata={
        "help": "traffic left its norm when at least this share of the event's steps are above the norm band"})
    ramp_ratio: float = field(default=1.3, metadata={
        "help": "the naive reading blames users when traffic in the event peaks at least this x its low in the lookback before it"})
    ramp_lookback_min: float = field(default=120.0, metadata={
        "help": "how far before the event the naive reading looks for the traffic it compares with"})
    asked_lookback_min: float = field(default=30.0, metadata={
        "help": "how far before the event to look for the autoscaler's request (desired above ready)"})
    normal_traffic: str = field(default="band_edge", metadata={
        "help": "T0: 'band_edge' = traffic itself inside the norm band, the band's edge outside it "
                "(only traffic above the band is a surge); 'expected' = the band's expected value"})
    overload_slope_min: float = field(default=1.0, metadata={
        "help": "beyond the uncontended range, log p99 grows at least this fast with log load per replica"})
    hac_maxlags: int | None = field(default=None, metadata={
        "help": "Newey-West lags of the evidence regression; None = 4 (n/100)^(2/9)"})

    def __post_init__(self) -> None:
        if self.normal_traffic not in ("band_edge", "expected"):
            raise ConfigError(f"normal_traffic={self.normal_traffic!r}: choose 'band_edge' or 'expected'")
        for name in ("min_duration_min", "merge_gap_min", "reaction_min"):
            if not 0 <= getattr(self, name) < float("inf"):  # NaN and infinity too
                raise ConfigError(f"{name}={getattr(self, name)}: give a finite number of minutes, 0 or more")
        if self.step_s < 1:
            raise ConfigError(f"step_s={self.step_s}: the step is at least 1 second")

    def timeline_config(self) -> TimelineConfig:
        """The timelines these settings read: their step and range."""
        return TimelineConfig(step_s=self.step_s, start_ms=self.start_ms, end_ms=self.end_ms)

    def settings_key(self) -> dict[str, Any]:
        """The settings that change which events are found (part of each event id)."""
        d = asdict(self)
        return {k: d[k] for k in ("step_s", "min_duration_min", "merge_gap_min", "relative_k")}
