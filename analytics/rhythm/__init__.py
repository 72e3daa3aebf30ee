"""Daily and weekly rhythm: MSTL decomposition, the norm band, and the summaries a review asks for.

The analysis owns: decomposing any timeline column (traffic per service, GPUs held per class,
activity, p99) into trend, daily, weekly and residual (:func:`decompose`), the norm band the
tail-event analysis judges surges against (:func:`norm_band`) and the forecast carries ahead
(:func:`norm_ahead`), and the meeting summaries
(:func:`summarise`: peak/trough hour, tidal window, weekday vs weekend, batch vs ramp).

Modules: ``config`` (:class:`RhythmConfig`), ``decompose`` (MSTL, gaps, level shifts, band),
``summary`` (profiles, hour of week, tidal window, batch), ``signals`` (which store series can
be analysed), ``report`` (per-signal results for the CLI and the page), ``servegen`` (the
ServeGen trace, whose date and zone are assumptions).
"""

from analytics.rhythm.config import RhythmConfig, config_help
from analytics.rhythm.band import norm_ahead, norm_band
from analytics.rhythm.decompose import Decomposition, decompose, decompose_many
from analytics.rhythm.summary import (BatchSummary, RhythmSummary, daily_profile, hour_of_week,
                                      ramp_window, summarise, summarise_batch, tidal_window)

__all__ = ["RhythmConfig", "config_help", "Decomposition", "decompose", "decompose_many",
           "norm_band", "norm_ahead", "BatchSummary", "RhythmSummary", "daily_profile", "hour_of_week",
           "ramp_window", "summarise", "summarise_batch", "tidal_window"]
