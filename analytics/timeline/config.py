"""The settings every timeline shares: step and time range."""

from __future__ import annotations

from dataclasses import dataclass, field

# The one step rule is the times' (a link's view settings, below the timelines, read it too).
from analytics.times import STEP_MAX_S, parse_step_s  # noqa: F401


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
