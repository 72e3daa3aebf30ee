"""The ``tidelens`` commands: each one's module and one-line help, in the order ``--help`` lists them.

Light on purpose (nothing but strings): ``tidelens --help`` reads this table alone, and a
command imports only its own module (and what that module needs), so the CLI starts at once.
"""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, str]] = {
    "sources": ("analytics.cli.store_cmds", "list loaded (and failed) sources"),
    "series": ("analytics.cli.store_cmds", "list series, optionally of one metric"),
    "audit": ("analytics.cli.store_cmds", "the record of changes made from the app: who loaded, pulled or "
                                         "changed the workload map, when, and what"),
    "ingest": ("analytics.cli.ingest_cmd", "load export files (Prometheus text/OpenMetrics, API JSON, Datadog, "
                                          "Telegraf, ServeGen, CSV, Parquet; gzip too) into the store"),
    "rhythm": ("analytics.cli.rhythm_cmd", "daily/weekly rhythm: peak and trough hour, tidal window, batch vs ramp"),
    "timeline": ("analytics.cli.timeline_cmd", "pool or service timeline at a step, as a table or CSV"),
    "signals": ("analytics.cli.timeline_cmd", "which recognised signals the store has, and what missing ones cost"),
    "classify": ("analytics.cli.timeline_cmd", "each workload, its class, team, pool and the rule that decided it"),
    "pull": ("analytics.cli.live_cmd", "pull timelines' inputs from a Prometheus-compatible server"),
    "collect": ("analytics.cli.live_cmd", "sample this machine's GPUs through NVML into the store"),
    "whatif": ("analytics.cli.whatif_cmd", "compare pool policies (shared, partitioned, tidal, MIG, ...) on one demand"),
    "export": ("analytics.cli.export_cmd", "tail events as Grafana annotations and the pool story as a dashboard; "
               "the workload map as Prometheus recording rules"),
    "plan": ("analytics.cli.plan_cmd", "the chosen policy as Kueue, MIG and time-slicing manifests, with a README"),
    "sample": ("analytics.cli.sample_cmd", "simulate a GPU pool and write what it would export (plus truth.json)"),
    "events": ("analytics.cli.events_cmd", "tail events of each service, their cause and evidence"),
    "report": ("analytics.cli.report_cmd", "postmortem report of one tail event (.html or .md)"),
    "change": ("analytics.cli.change_cmd", "record a change of the pool's policy, list them, see the candidates in "
                                          "the data, and compare before with after (the what-if scored)"),
    "forecast": ("analytics.cli.forecast_cmd", "tomorrow's collisions of inference with batch: when, how likely, how "
                                              "many minutes over the SLO, the change tonight that avoids each; "
                                              "--backtest scores it on every day of the store"),
    "review": ("analytics.cli.review_cmd", "capacity-review report of a range: pool, rhythm, tail events, "
                                          "what-if, chargeback (.html or .md)"),
}


def command_help(name: str) -> str:
    """The one-line help of a command (its module's ``add_parser`` uses it)."""
    return COMMANDS[name][1]
