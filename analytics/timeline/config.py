"""The settings every timeline shares: step and time range."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from analytics.errors import ConfigError


@dataclass
class TimelineConfig:
    """Step and range of a timeline; the CLI's options and the pages' sliders use these fields."""

    step_s: int = field(default=60, metadata={
        "help": "timeline step in seconds; a step's ts is its end, covering (ts - step, ts]"})
    start_ms: int | None = field(default=None, metadata={
        "help": "first instant (UTC epoch ms) to cover; default the store's first sample"})
    end_ms: int | None = field(default=None, metadata={
        "help": "last instant (UTC epoch ms) to cover; default the store's last sample"})


# The classes a GPU is counted in, in the order every chart stacks them and every legend lists
# them; light to import (charts read it without importing the timeline's store code).
CLASS_COLUMNS = ("inference", "batch", "other", "unmanaged", "unknown", "idle")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
# The longest step (a timeline's, a rhythm's resolution, the rules' evaluation interval): a day. A
# longer one is a typo, and `--interval 99999999999999d` hung the rules' export in a loop over it.
STEP_MAX_S = 86_400


def parse_step_s(text: str, what: str = "step") -> int:
    """A step like ``30s``, ``1m``, ``5m``, ``1h`` (bare numbers are seconds) in whole seconds.

    >>> parse_step_s("1m"), parse_step_s("90"), parse_step_s("1h")
    (60, 90, 3600)

    Raises :class:`ConfigError` naming ``what`` (the flag) for text that is not a duration, or
    not whole seconds from 1s to a day (:data:`STEP_MAX_S`).
    """
    m = _DURATION.match(str(text))
    if not m:
        raise ConfigError(f"{what} {str(text)[:80]!r} is not a duration: write e.g. 30s, 1m, 5m or 1h")
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    if not 1 <= seconds <= STEP_MAX_S or seconds != int(seconds):
        raise ConfigError(f"{what} {str(text)[:80]!r} must be a whole number of seconds from 1s to 1d")
    return int(seconds)
