"""The settings of the rhythm analysis, shared by the CLI flags and the page's sliders."""

from __future__ import annotations

from dataclasses import dataclass, field
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from analytics.errors import ConfigError
from analytics.fieldhelp import fields_help

DAY_S = 86_400


@dataclass(frozen=True)
class RhythmConfig:
    """How to decompose a series into trend, daily, weekly and residual, and how to summarise it.

    Every field carries its help text in ``metadata["help"]``; the CLI builds its flags and the
    page its widgets from these.
    """

    resolution_s: int = field(default=600, metadata={
        "help": "decomposition step in seconds; finer data is averaged into it and the "
                "components are interpolated back (600 s keeps 28 days well under a second); "
                "must divide a day"})
    band_low_q: float = field(default=0.05, metadata={
        "help": "lower quantile of the residual that sets the norm band's lower edge"})
    band_high_q: float = field(default=0.95, metadata={
        "help": "upper quantile of the residual that sets the norm band's upper edge "
                "(traffic above it is a surge)"})
    max_fill_gap_s: int = field(default=3600, metadata={
        "help": "gaps up to this long are filled by linear interpolation; longer ones are "
                "filled from the same time on neighbouring days and reported"})
    weekly: bool = field(default=True, metadata={
        "help": "fit a weekly period too (needs more than 14 days of data; otherwise daily only)"})
    robust: bool = field(default=False, metadata={
        "help": "robust LOESS (down-weights outliers such as surges; about 8x slower)"})
    norm_surge_sd: float | None = field(default=5.0, metadata={
        "help": "the norm band (what a surge is judged against) is fitted without the steps that run more "
                "than this many robust standard deviations above the typical day (the median of the same "
                "time on days of the same kind, weekday or weekend, scaled to the day's level), so surges "
                "do not teach the norm; None = fit every step"})
    level_shift_share: float = field(default=0.2, metadata={
        "help": "a jump between the day before and the day after larger than this share of the "
                "series' level, lasting, is a level shift and goes into the trend"})
    log_scale: bool = field(default=False, metadata={
        "help": "decompose log(value) (for latencies, whose tails are multiplicative); trend, "
                "daily, weekly and residual are then in log units, observed/expected/band in the "
                "signal's own"})
    timezone: str = field(default="UTC", metadata={
        "help": "IANA zone in which hours (peak, trough, tidal window) are shown"})
    tidal_share: float = field(default=0.5, metadata={
        "help": "the tidal window is the hours when the daily profile stays below this share of "
                "its peak"})
    ramp_top_share: float = field(default=0.8, metadata={
        "help": "the morning ramp runs from the end of the tidal window until the profile first "
                "reaches this share of its peak"})
    ramp_start_hour: int | None = field(default=None, metadata={
        "help": "override the ramp's start hour (displayed zone); None = from the profile"})
    ramp_end_hour: int | None = field(default=None, metadata={
        "help": "override the ramp's end hour (displayed zone, exclusive); None = from the profile"})
    batch_hold_share: float = field(default=0.5, metadata={
        "help": "batch counts as holding GPUs in a step when it holds more than this share of "
                "its own maximum (0.5: the big nightly jobs, not small ad-hoc ones)"})

    def __post_init__(self) -> None:
        if self.resolution_s <= 0 or DAY_S % self.resolution_s:
            raise ConfigError(f"resolution_s={self.resolution_s}: must be a positive divisor of "
                              f"86400 (e.g. 300, 600, 900, 1800, 3600)")
        if not 0.0 <= self.band_low_q < self.band_high_q <= 1.0:
            raise ConfigError(f"band quantiles {self.band_low_q}..{self.band_high_q}: need "
                              f"0 <= band_low_q < band_high_q <= 1")
        if not 0.0 < self.tidal_share < 1.0:
            raise ConfigError(f"tidal_share={self.tidal_share}: must be between 0 and 1")
        for name in ("ramp_start_hour", "ramp_end_hour"):
            h = getattr(self, name)
            if h is not None and not 0 <= h <= 23:
                raise ConfigError(f"{name}={h}: must be an hour 0..23")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError(f"timezone={self.timezone!r} is not an IANA zone name "
                              f"(e.g. 'UTC', 'Europe/Berlin', 'Asia/Shanghai')") from exc


def config_help() -> dict[str, str]:
    """Field name -> help text, for CLI flags and page widgets."""

    return fields_help(RhythmConfig)

