"""The collision forecast: before it happens, when each service will meet the batch, how likely and how bad.

- :func:`forecast` (:mod:`.model`; its config and answer :mod:`.horizon`): for a moment and a horizon, the traffic each service's rhythm
  expects, the batch that will hold GPUs, and the collision windows with their probability, their
  minutes over the SLO and the runs responsible, all replayed by the what-if;
- :mod:`.action`: for each collision, the smallest change tonight that avoids it, and its cost to batch;
- :mod:`.hindcast`: every day of a store forecast the evening before and at 07:00, against what
  happened, scored beside two baselines;
- :mod:`.runs_ahead` (runs ahead), :mod:`.outcomes` (what a day's forecast replays), :mod:`.replay`
  (the what-if on the horizon), :mod:`.profile` (others' usual holdings), :mod:`.minutes_range` (a range
  calibrated on the past), :mod:`.frames` (the one place the timelines are read), :mod:`.report`
  (the words and tables the page, the review and the CLI show).
"""

from analytics.forecast.horizon import CollisionWindow, DayForecast, Forecast, ForecastConfig
from analytics.forecast.model import forecast

__all__ = ["CollisionWindow", "DayForecast", "Forecast", "ForecastConfig", "forecast"]
