"""The workload map as Prometheus recording rules (``tidelens export rules``), and their checks.

:mod:`analytics.rules.compile` writes the rules (three groups: devices, the map, the pools);
:mod:`analytics.rules.quoting` the PromQL text and where Prometheus' regexes must be told to
read a pattern as :mod:`analytics.workloads` does; :mod:`analytics.rules.unittests` the
``promtool test rules`` file that shows, on the simulator's label sets, that both agree.
"""

from analytics.rules.compile import DIGEST_LABEL, RulesConfig, compile_rules, map_digest, rules_yaml

__all__ = ["DIGEST_LABEL", "RulesConfig", "compile_rules", "map_digest", "rules_yaml"]
