"""The named scenarios: ``morning``, ``partitioned``, ``mixed``, ``real-traffic`` and ``compound``."""

from __future__ import annotations

from dataclasses import replace

from analytics.sample.cluster import BatchConfig, FaultConfig, ScenarioConfig, ServiceConfig, SurgeConfig

CHAT = ServiceConfig(
    name="chat-vllm", namespace="inference", kind="vllm", team="serving", peak_rps=40.0,
    trough_ratio=0.15, weekend_ratio=0.6, concurrency=32, hold_s=6.0, service_median_s=0.08,
    service_sigma=0.55, slowdown=6.0, decode_median_s=5.0, target_util=0.45, min_replicas=2,
    max_replicas=20, warmup_min=6, cooldown_min=10, patience_s=30.0, slo_p99_ms=1000.0,
    fb_used_mib=72000, model_name="meta-llama/Llama-3.1-8B-Instruct")
RECOMMENDER = ServiceConfig(
    name="recommender", namespace="recsys", kind="http", team="recsys", peak_rps=1500.0,
    trough_ratio=0.2, weekend_ratio=0.7, concurrency=8, hold_s=0.02, service_median_s=0.012,
    service_sigma=0.5, slowdown=3.0, target_util=0.6, min_replicas=3, max_replicas=12,
    warmup_min=2, cooldown_min=10, patience_s=2.0, slo_p99_ms=100.0, fb_used_mib=14000)

SCENARIOS: dict[str, ScenarioConfig] = {
    "morning": ScenarioConfig(
        name="morning",
        description="Shared pool: the 02:00 nightly fine-tune holds most GPUs until ~10:30-11:00, so the "
                    "09:00-09:30 ramp cannot scale up; a few afternoons bring genuine surges.",
        services=(CHAT, RECOMMENDER), batch=BatchConfig(), surges=SurgeConfig(days=4)),
    "partitioned": ScenarioConfig(
        name="partitioned",
        description="Inference reserves its GPUs; batch never touches them. Only surges (and their "
                    "warm-up) make tail events.",
        services=(CHAT, RECOMMENDER), batch=BatchConfig(finetune_max_gpus=30),
        surges=SurgeConfig(days=5), inference_reserved_gpus=28),
    "mixed": ScenarioConfig(
        name="mixed",
        description="Shared pool with the fine-tune, and surges that land on the morning ramp on some days.",
        services=(CHAT, RECOMMENDER), batch=BatchConfig(),
        surges=SurgeConfig(days=6, morning_days=3, factor=(1.5, 2.2))),
    "real-traffic": ScenarioConfig(
        name="real-traffic",
        description="The morning pool with the chat service's traffic shaped by the ServeGen production "
                    "trace (Alibaba Model Studio, m-large; zone and weekday assumed).",
        services=(replace(CHAT, peak_rps=36.0), RECOMMENDER), batch=BatchConfig(),
        surges=SurgeConfig(days=0), traffic="servegen"),
    "compound": ScenarioConfig(
        name="compound",
        description="One LLM service in a shared pool (told at 48 GPUs): the nightly fine-tune holds 32 GPUs "
                    "into the morning, and on some mornings traffic surges 2-2.5x while it still holds them "
                    "(both causes at once); on some nights a degraded replica answers slowly with nothing else wrong.",
        # one service, busier than chat-vllm, so that the 13 GPUs the hold leaves are short even
        # without a surge (and another service's surge never starves it: its tails are its own);
        # surges on a third of the days, so a minority of mornings: a norm learns what recurs on
        # most of them (on 3 of 5 weekday mornings the median day is the surged one)
        services=(replace(CHAT, peak_rps=60.0, max_replicas=28),), batch=BatchConfig(finetune_max_gpus=32),
        surges=SurgeConfig(days=5, morning_days=5, factor=(2.0, 2.5)), faults=FaultConfig(nights=6)),
}
# The pool size each scenario's story is told at (``simulate``'s ``gpus`` default is 64).
STORY_GPUS: dict[str, int] = {"compound": 48}
