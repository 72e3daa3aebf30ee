"""``timelines()``: one device pass for all three timelines, equal to the separate calls."""

from __future__ import annotations

import pytest
from polars.testing import assert_frame_equal

from analytics.timeline import TimelineConfig, holdings, pool_timeline, service_timeline, timelines
from analytics.workloads import Rule, WorkloadMap
from test_timeline_pool import MIN, Builder, dcgm, gpu_labels, mixed_node  # tests/ is on sys.path
from test_timeline_service import add_hist


def _store_with_everything(store) -> None:
    b = Builder()
    mins = range(1, 8)
    mixed_node(b, mins)
    h = "gpu-node-01"
    dcgm(b, gpu_labels(h, 0, "chat-vllm-7d9c8b6f5-x2k4q", "inference"), mins, util=70)
    dcgm(b, gpu_labels(h, 1), mins)
    dcgm(b, gpu_labels("bare-node", 0, job="bare-metal-exporter"), mins)  # never labels pods: unknown
    b.add("kube_node_status_allocatable", {"node": h, "resource": "nvidia_com_gpu", "unit": "integer"},
          [(m * MIN, 2.0) for m in mins])
    b.add("kube_pod_container_resource_requests", {"namespace": "x", "pod": "train-b-0", "node": h,
                                                   "container": "c", "resource": "nvidia_com_gpu",
                                                   "unit": "integer"}, [(m * MIN, 1.0) for m in mins])
    b.add("kube_pod_status_phase", {"namespace": "x", "pod": "train-b-0", "phase": "Pending"},
          [(m * MIN, float(m >= 4)) for m in mins])
    lab = {"model_name": "llama", "namespace": "inference", "pod": "chat-vllm-7d9c8b6f5-x2k4q"}
    add_hist(b, "vllm:time_to_first_token_seconds", lab, list(range(0, 8)),
             [[m, 2 * m, 1, 0, 1] for m in range(8)])
    b.add("kube_horizontalpodautoscaler_status_desired_replicas",
          {"horizontalpodautoscaler": "chat-vllm", "namespace": "inference"}, [(m * MIN, 2.0) for m in mins])
    b.add("kube_deployment_status_replicas_ready", {"deployment": "chat-vllm", "namespace": "inference"},
          [(m * MIN, 1.0) for m in mins])
    b.load(store)


@pytest.mark.parametrize("cfg", [TimelineConfig(step_s=60), TimelineConfig(step_s=120, start_ms=3 * MIN + 1,
                                                                            end_ms=6 * MIN)])
@pytest.mark.parametrize("with_teams", [False, True])
def test_shared_pass_equals_separate_calls(store, cfg, with_teams):
    _store_with_everything(store)
    wmap = WorkloadMap(rules=[Rule("serving", {"hostname": "gpu-node-01"}, pool="serving")])
    both = timelines(store, cfg, wmap, with_teams=with_teams)
    assert both.pool.height > 0 and both.holdings.height > 0 and both.services.height > 0
    assert set(both.holdings["cls"]) >= {"inference", "batch", "unmanaged", "unknown", "idle"}
    assert both.pool["pending_pods"].max() == 1 and both.pool["desired_replicas"].drop_nulls().len() > 0
    assert_frame_equal(both.pool, pool_timeline(store, cfg, wmap, with_teams=with_teams))
    assert_frame_equal(both.holdings, holdings(store, cfg, wmap))
    assert_frame_equal(both.services, service_timeline(store, cfg, wmap))
    assert both.service_names() == sorted(set(both.services["service"].drop_nulls()))


def test_empty_store_and_no_devices_give_empty_frames_with_columns(store):
    empty = timelines(store)
    assert empty.pool.columns == pool_timeline(store).columns and empty.pool.height == 0
    assert empty.holdings.columns == holdings(store).columns and empty.services.height == 0
    b = Builder()
    add_hist(b, "vllm:time_to_first_token_seconds", {"pod": "chat-vllm-7d9c8b6f5-x2k4q", "namespace": "inference"},
             [0, 1, 2], [[1, 1, 1, 1, 1]] * 3)
    b.load(store)
    only_services = timelines(store, TimelineConfig(step_s=60))
    assert only_services.pool.height == 0 and only_services.holdings.height == 0
    assert_frame_equal(only_services.services, service_timeline(store, TimelineConfig(step_s=60)))
    assert only_services.services.height > 0
