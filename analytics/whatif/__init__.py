"""The pool what-if model: one demand replayed under each GPU-pool policy, side by side.

The core takes arrays (a traffic curve and parameters), never a store: ``calibrate`` builds
a ``PoolScenario`` from the store, ``PRESETS`` build the design's two stories.
"""

from analytics.whatif.backtest import backtest
from analytics.whatif.calibrate import calibrate
from analytics.whatif.mig import MIG_PROFILES, MigProfile, choose_layout, placements
from analytics.whatif.outputs import (SUMMARY_KEYS, PolicyResult, burst_bands, capacity_plan,
                                    compare, frontier, headroom_by_hour, next_gpus,
                                    simulate)
from analytics.whatif.params import (BatchJob, BatchParams, PoolParams, PoolScenario,
                                   ServiceParams, field_specs)
from analytics.whatif.policies import POLICIES, POLICY_HELP, reservation
from analytics.whatif.presets import PRESETS
from analytics.whatif.scenario_toml import scenario_from_toml, scenario_to_toml

__all__ = [
    "POLICIES", "POLICY_HELP", "PRESETS", "MIG_PROFILES", "SUMMARY_KEYS", "BatchJob",
    "BatchParams", "MigProfile", "PolicyResult", "PoolParams", "PoolScenario", "ServiceParams",
    "backtest", "burst_bands", "calibrate", "capacity_plan", "choose_layout", "compare",
    "field_specs",
    "frontier", "headroom_by_hour", "next_gpus", "placements", "scenario_from_toml", "scenario_to_toml",
    "reservation", "simulate",
]
