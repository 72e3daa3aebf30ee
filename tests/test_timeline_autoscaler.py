"""Autoscalers linked to the service they scale the way clusters name them (analytics.timeline.autoscaler)."""

from __future__ import annotations

import json

import pytest
from test_timeline_pool import MIN, Builder
from test_timeline_service import add_hist

from analytics import signals as sg
from analytics.cli import main
from analytics.store import Store
from analytics.timeline import TimelineConfig, autoscaler_links, service_timeline
from analytics.timeline.autoscaler import Hpa, ServiceTargets, link_deployments, link_hpas
from analytics.workloads import AutoscalerRule, WorkloadMap, load_map

CHAT = ServiceTargets("chat-api-vllm", "llm", ("chat-api-vllm",))
REC = ServiceTargets("recommender", "recsys", ("recommender",))


def links(hpas, services=(CHAT, REC), rules=()):
    return {(x.name): (x.service, x.rule, x.status) for x in link_hpas(hpas, list(services), list(rules))}


def test_same_name_prefix_both_ways_and_keda():
    got = links([Hpa("llm", "chat-api"), Hpa("recsys", "recommender-hpa")])
    assert got == {"chat-api": ("chat-api-vllm", "name prefix", "linked"),
                   "recommender-hpa": ("recommender", "name prefix", "linked")}
    got = links([Hpa("llm", "keda-hpa-chat-api-vllm"), Hpa("recsys", "keda-hpa-recommender-so")])
    assert got == {"keda-hpa-chat-api-vllm": ("chat-api-vllm", "KEDA ScaledObject, same name", "linked"),
                   "keda-hpa-recommender-so": ("recommender", "KEDA ScaledObject, name prefix", "linked")}
    assert links([Hpa("llm", "chat-api-vllm")])["chat-api-vllm"] == ("chat-api-vllm", "same name", "linked")


def test_prefix_needs_a_name_boundary_and_the_same_namespace():
    # "chat" is not a prefix of "chatter" at a boundary; and an HPA never links across namespaces
    svc = [ServiceTargets("chatter", "a", ("chatter",)), ServiceTargets("chat-api-vllm", "b", ("chat-api-vllm",)),
           ServiceTargets("other", "a", ("other",))]
    got = links([Hpa("a", "chat"), Hpa("a", "other")], svc)
    assert got["chat"] == (None, None, "unlinked")
    assert got["other"] == ("other", "same name", "linked")


def test_longest_prefix_wins_and_a_tie_is_ambiguous():
    svc = [ServiceTargets("chat-api-a", "llm", ("chat-api-a",)), ServiceTargets("chat-api-b", "llm", ("chat-api-b",)),
           ServiceTargets("chat-api-b-vllm", "llm", ("chat-api-b-vllm",))]
    out = {x.name: x for x in link_hpas([Hpa("llm", "chat-api"), Hpa("llm", "chat-api-b-v2")], svc)}
    assert out["chat-api"].status == "ambiguous"
    assert set(out["chat-api"].candidates) == {"chat-api-a", "chat-api-b", "chat-api-b-vllm"}
    assert "tidelens.toml" in out["chat-api"].note
    # chat-api-b-v2 shares 10 characters with chat-api-b (at a boundary) and none with the others
    assert (out["chat-api-b-v2"].service, out["chat-api-b-v2"].rule) == ("chat-api-b", "name prefix")


def test_info_scale_target_wins_over_names_and_an_unknown_target_stays_unlinked():
    svc = [CHAT, ServiceTargets("frontend", "llm", ("frontend",))]
    got = links([Hpa("llm", "frontend-autoscaler", "Deployment", "chat-api-vllm"),
                 Hpa("llm", "batch-hpa", "Deployment", "etl-workers")], svc)
    assert got["frontend-autoscaler"] == ("chat-api-vllm", "kube_horizontalpodautoscaler_info scale target", "linked")
    assert got["batch-hpa"][2] == "unlinked"


def test_user_rule_first_and_only_hpa_in_namespace_last():
    rule = AutoscalerRule(hpa="scaler-.*", service="chat-api-vllm")
    got = links([Hpa("llm", "scaler-7")], rules=[rule])
    assert got["scaler-7"][:2] == ("chat-api-vllm", "tidelens.toml")
    got = links([Hpa("recsys", "rank-autoscale")])
    assert got["rank-autoscale"] == ("recommender", "only HPA in the namespace", "linked")
    # a rule naming a service the store lacks says so, and no fallback guesses past it
    out = link_hpas([Hpa("recsys", "rank-autoscale")], [REC], [AutoscalerRule(hpa="rank-.*", service="nope")])
    assert out[0].status == "unlinked" and "no service 'nope'" in out[0].note


def test_two_hpas_on_one_service_the_stronger_rule_keeps_it():
    got = links([Hpa("llm", "chat-api-vllm"), Hpa("llm", "chat-api")])
    assert got["chat-api-vllm"] == ("chat-api-vllm", "same name", "linked")
    assert got["chat-api"][2] == "ambiguous"
    both = links([Hpa("llm", "chat"), Hpa("llm", "chat-api")], [ServiceTargets("chat-api-vllm", "llm",
                                                                                ("chat-api-vllm",))])
    # equally strong (both name prefixes): neither decides
    assert {v[2] for v in both.values()} == {"ambiguous"}


def test_deployments_link_to_the_hpa_target_or_the_pods_workload():
    hpa = link_hpas([Hpa("llm", "fe", "Deployment", "chat-api-vllm")], [CHAT])
    deps = link_deployments([("llm", "chat-api-vllm"), ("llm", "unrelated")], [CHAT], hpa)
    assert [(d.name, d.service, d.status) for d in deps] == [("chat-api-vllm", "chat-api-vllm", "linked"),
                                                             ("unrelated", None, "unlinked")]


def _store_with(builder_extra, path: str = ":memory:") -> Store:
    b = Builder()
    pod = "chat-api-vllm-6f7c9d8b4-x2k4q"
    add_hist(b, sg.VLLM_TTFT, {"pod": pod, "namespace": "llm"}, [1, 2, 3],
             [[0] * 5, [10, 10, 0, 0, 0], [10, 10, 0, 0, 0]])
    builder_extra(b)
    st = Store(path)
    b.load(st)
    return st


def _gauge(b: Builder, metric: str, labels: dict[str, str], values: list[float]) -> None:
    b.add(metric, {"instance": "ksm:8080", "job": "kube-state-metrics", **labels},
          [((i + 1) * MIN, v) for i, v in enumerate(values)])


def test_service_timeline_reads_a_prefix_hpa_and_available_where_no_ready():
    def extra(b):
        _gauge(b, sg.KSM_HPA_DESIRED, {"horizontalpodautoscaler": "chat-api", "namespace": "llm"}, [2, 3, 5])
        _gauge(b, sg.KSM_DEPLOY_AVAILABLE, {"deployment": "chat-api-vllm", "namespace": "llm"}, [2, 2, 3])
    with _store_with(extra) as st:
        tl = service_timeline(st, TimelineConfig(step_s=60))
        assert tl["desired_replicas"].to_list() == [2.0, 3.0, 5.0]
        assert tl["ready_replicas"].to_list() == [2.0, 2.0, 3.0]
        lk = autoscaler_links(st)
        assert lk.select("kind", "name", "service", "rule", "status").rows() == [
            ("deployment", "chat-api-vllm", "chat-api-vllm", "same name", "linked"),
            ("hpa", "chat-api", "chat-api-vllm", "name prefix", "linked")]


def test_ready_wins_over_available_and_info_links_an_unrelated_name():
    def extra(b):
        _gauge(b, sg.KSM_HPA_DESIRED, {"horizontalpodautoscaler": "frontend-autoscaler", "namespace": "llm"}, [4, 4, 4])
        _gauge(b, sg.KSM_HPA_INFO, {"horizontalpodautoscaler": "frontend-autoscaler", "namespace": "llm",
                                    "scaletargetref_kind": "Deployment", "scaletargetref_name": "chat-api-vllm",
                                    "scaletargetref_api_version": "apps/v1"}, [1, 1, 1])
        _gauge(b, sg.KSM_DEPLOY_READY, {"deployment": "chat-api-vllm", "namespace": "llm"}, [1, 2, 3])
        _gauge(b, sg.KSM_DEPLOY_AVAILABLE, {"deployment": "chat-api-vllm", "namespace": "llm"}, [9, 9, 9])
    with _store_with(extra) as st:
        tl = service_timeline(st, TimelineConfig(step_s=60))
        assert tl["desired_replicas"].to_list() == [4.0] * 3
        assert tl["ready_replicas"].to_list() == [1.0, 2.0, 3.0]
        lk = autoscaler_links(st).filter(kind="hpa")
        assert (lk["rule"][0], lk["target"][0]) == ("kube_horizontalpodautoscaler_info scale target",
                                                    "Deployment/chat-api-vllm")


def test_an_unlinked_hpa_gives_no_desired_replicas():
    def extra(b):
        _gauge(b, sg.KSM_HPA_DESIRED, {"horizontalpodautoscaler": "etl", "namespace": "batch"}, [7, 7, 7])
    with _store_with(extra) as st:
        tl = service_timeline(st, TimelineConfig(step_s=60))
        assert tl["desired_replicas"].null_count() == 3
        assert autoscaler_links(st)["status"].to_list() == ["unlinked"]


def test_autoscaler_rule_round_trips_through_tidelens_toml_and_classify_shows_links(tmp_path, capsys):
    cfg = tmp_path / "tidelens.toml"
    cfg.write_text('[map]\nidle_activity_pct = 2.5\n\n[[autoscaler]]\nhpa = "fe-.*"\nnamespace = "llm"\n'
                   'service = "chat-api-vllm"\n', encoding="utf-8")
    wmap = load_map(cfg)
    assert wmap.idle_activity_pct == 2.5 and wmap.autoscalers[0].matches("fe-1", "llm")
    assert not wmap.autoscalers[0].matches("fe-1", "other")

    def extra(b):
        _gauge(b, sg.KSM_HPA_DESIRED, {"horizontalpodautoscaler": "fe-1", "namespace": "llm"}, [3, 3, 3])
    db = tmp_path / "s.duckdb"
    _store_with(extra, str(db)).close()
    assert main(["classify", "--db", str(db), "--config", str(cfg), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(a["name"], a["service"], a["status"]) for a in out["autoscalers"] if a["kind"] == "hpa"] == [
        ("fe-1", "chat-api-vllm", "linked")]
    assert out["autoscalers"][-1]["rule"] == "tidelens.toml"
    assert main(["classify", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    # without the rule, fe-1 is the only HPA of its namespace, which has one service
    assert "Autoscalers" in text and "only HPA in the namespace" in text


@pytest.mark.parametrize("bad,msg", [('[[autoscaler]]\nhpa = "("\nservice = "x"\n', "is not a pattern Tidelens accepts"),
                                     ('[[autoscaler]]\nhpa = "x"\n', "needs hpa and service"),
                                     ('[map]\nidle_memory_mib = "lots"\n', "give a number")])
def test_bad_autoscaler_rules_name_the_file(tmp_path, bad, msg):
    from analytics.errors import ConfigError
    cfg = tmp_path / "tidelens.toml"
    cfg.write_text(bad, encoding="utf-8")
    with pytest.raises(ConfigError, match=msg) as exc:
        load_map(cfg)
    assert str(cfg) in str(exc.value)


def test_map_with_autoscalers_saves_and_loads_back(tmp_path):
    from analytics.workloads import save_map
    wmap = WorkloadMap(autoscalers=[AutoscalerRule(hpa="a", service="b", namespace="n")], idle_memory_mib=512.0)
    save_map(wmap, tmp_path / "t.toml")
    back = load_map(tmp_path / "t.toml")
    assert back.autoscalers == wmap.autoscalers and back.idle_memory_mib == 512.0
