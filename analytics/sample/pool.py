"""The pool, minute by minute: replicas asking for GPUs, warming up, serving, and batch jobs
admitted onto free GPUs and holding them until done.

One sequential loop (GPU binding is inherently stateful); everything it records is a numpy
array or a list of :class:`Pod` so the latency and export stages stay vectorised.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from analytics.sample.autoscaler import Hpa
from analytics.sample.batch import BatchJob
from analytics.sample.cluster import ScenarioConfig, Topology

RS_HASH = {"chat-vllm": "7d9f8c6b5d", "recommender": "5c8b7f9d44"}
POD_CHARS = "bcdfghjklmnpqrstvwxz2456789"


@dataclass
class Pod:
    """One GPU pod's life. Minutes are indices into the run (``end_min`` exclusive)."""

    idx: int
    name: str
    workload: str
    namespace: str
    container: str
    klass: str  # inference | batch | other
    created_by_kind: str
    created_by_name: str
    priority_class: str
    created_min: int
    end_min: int
    gpu: int = -1  # pool index of the (first) GPU it holds (-1 while pending)
    more_gpus: tuple[int, ...] = ()  # tensor-parallel replicas: the other GPUs it holds, same node
    scheduled_min: int = -1
    ready_min: int = -1  # inference: serves from ready_min + 1 (endpoints update)
    service: str | None = None
    job_id: str | None = None
    resource: str = "nvidia_com_gpu"
    mig: tuple[str, int] | None = None  # (profile, GPU instance id) for MIG pods
    hide_pod_labels: bool = False  # dcgm-exporter could not map this device to its pod

    @property
    def gpus(self) -> tuple[int, ...]:
        """Pool indices of every GPU it holds (empty while pending)."""
        return (self.gpu,) + self.more_gpus if self.gpu >= 0 else ()


@dataclass
class PoolRun:
    """What the loop recorded."""

    pods: list[Pod]
    holders: np.ndarray  # (T, G) pod idx holding each GPU each minute, -1 none
    desired: dict[str, np.ndarray]
    current: dict[str, np.ndarray]  # replicas that exist (pending + warming + ready)
    ready: dict[str, np.ndarray]  # replicas ready at the minute's scrape
    serving: dict[str, np.ndarray]  # (T, Rmax) pod idx serving each minute, -1 padding
    kueue_pending: np.ndarray
    kueue_active: np.ndarray
    kueue_admitted_total: np.ndarray
    jobs: list[dict] = field(default_factory=list)  # admitted jobs with their GPUs and times


def _suffix(rng: np.random.Generator) -> str:
    return "".join(POD_CHARS[i] for i in rng.integers(0, len(POD_CHARS), 5))


def run_pool(scenario: ScenarioConfig, topo: Topology, n_min: int, arrivals: dict[str, np.ndarray],
             jobs: list[BatchJob], rng: np.random.Generator,
             warmup_draws: dict[str, np.ndarray] | None = None) -> PoolRun:
    """Simulate autoscaling and batch admission over ``n_min`` minutes.

    ``warmup_draws``: per service whose warm-up varies (``ServiceConfig.warmup_max_min``), the
    warm-up minutes of the ``j``-th replica bound in minute ``t`` at ``[t, j]`` (drawn up front, so
    a counterfactual run binding at the same minute draws the same); the others warm up
    ``warmup_min``.
    """
    warmup_draws = warmup_draws or {}
    general = list(topo.general)
    reserved = set(general[: scenario.inference_reserved_gpus])
    free_res = sorted(g for g in general if g in reserved)
    free_shr = sorted(g for g in general if g not in reserved)
    n_gpu = len(topo.gpus)
    holder = np.full(n_gpu, -1, dtype=np.int32)
    holders = np.full((n_min, n_gpu), -1, dtype=np.int32)
    pods: list[Pod] = []
    svcs = scenario.services
    hpas = {s.name: Hpa(s) for s in svcs}
    active: dict[str, list[int]] = {s.name: [] for s in svcs}
    desired = {s.name: np.zeros(n_min, np.int32) for s in svcs}
    current = {s.name: np.zeros(n_min, np.int32) for s in svcs}
    ready = {s.name: np.zeros(n_min, np.int32) for s in svcs}
    rmax = {s.name: s.max_replicas for s in svcs}
    serving = {s.name: np.full((n_min, s.max_replicas), -1, np.int32) for s in svcs}
    k_pending = np.zeros(n_min, np.int32)
    k_active = np.zeros(n_min, np.int32)
    k_total = np.zeros(n_min, np.int64)
    pending_inf: list[int] = []
    queue: list[BatchJob] = []
    next_job = 0
    running_jobs: list[tuple[int, list[int], dict]] = []  # (end_min, pod idxs, record)
    admitted = 0
    records: list[dict] = []

    node_of = [g.node for g in topo.gpus]
    svc_by = {s.name: s for s in svcs}

    def take(pool: list[int]) -> int:
        return pool.pop(0)

    def take_group(pool: list[int], k: int) -> list[int] | None:
        """The lowest ``k`` free GPUs of the first node with ``k`` free in ``pool`` (None: none has)."""
        by_node: dict[str, list[int]] = {}
        for g in pool:
            same = by_node.setdefault(node_of[g], [])
            same.append(g)
            if len(same) == k:
                for x in same:
                    pool.remove(x)
                return same
        return None

    def grab(k: int) -> list[int] | None:
        """GPUs for an inference replica needing ``k`` of one node: reserved ones first."""
        if k == 1:  # any free GPU
            pool = free_res if free_res else free_shr
            return [take(pool)] if pool else None
        return take_group(free_res, k) or take_group(free_shr, k)

    def release(p: Pod, t: int) -> None:
        p.end_min = t
        for g in p.gpus:
            holder[g] = -1
            bisect.insort(free_res if g in reserved else free_shr, g)

    def new_pod(**kw) -> Pod:
        p = Pod(idx=len(pods), **kw)
        pods.append(p)
        return p

    def bind(p: Pod, gs: list[int], t: int) -> None:
        p.gpu, p.more_gpus, p.scheduled_min = gs[0], tuple(gs[1:]), t
        holder[gs] = p.idx

    change = scenario.change
    change_min = change.day * 1440 if change is not None else n_min
    window = None
    if change is not None and change.policy == "tidal":
        window = (int(round(change.tidal_hours[0] * 60)), int(round(change.tidal_hours[1] * 60)))

    def in_window(t: int) -> bool:
        m = t % 1440
        a, b = window  # type: ignore[misc]
        return a <= m < b if a < b else (m >= a or m < b)

    for t in range(n_min):
        if t == change_min and change is not None and change.policy == "partitioned":
            # From this midnight the first GPUs are inference's; one batch holds stays held
            # until its job ends, and comes back to the reservation when released.
            reserved.clear()
            reserved.update(general[: change.reserved_gpus])
            free = sorted(free_res + free_shr)
            free_res[:] = [g for g in free if g in reserved]
            free_shr[:] = [g for g in free if g not in reserved]
        if window is not None and t >= change_min and t % 1440 == window[1] and running_jobs:
            for _end, idxs, rec in running_jobs:  # drained at the window's end
                for i in idxs:
                    release(pods[i], t)
                rec["end_min"] = t
                rec["drained"] = True
            running_jobs = []
        # 1. batch jobs that finished
        if running_jobs:
            still = []
            for end, idxs, rec in running_jobs:
                if end <= t:
                    for i in idxs:
                        release(pods[i], t)
                else:
                    still.append((end, idxs, rec))
            running_jobs = still
        # 2. autoscaler decisions; the HPAs sync in reverse order of the services, so within a
        # minute the later (smaller, faster) services' pods queue for GPUs first
        for s in reversed(svcs):
            obs = arrivals[s.name][t - 1 if t else 0] / 60.0
            want = hpas[s.name].desired(obs)
            desired[s.name][t] = want
            act = active[s.name]
            if t == 0:
                for _ in range(want):  # the run starts warm: min replicas already serving
                    p = new_pod(name=f"{s.name}-{RS_HASH.get(s.name, 'abc')}-{_suffix(rng)}", workload=s.name,
                                namespace=s.namespace, container=s.name, klass="inference",
                                created_by_kind="ReplicaSet", created_by_name=f"{s.name}-{RS_HASH.get(s.name, 'abc')}",
                                priority_class="inference-high", created_min=0, end_min=n_min, service=s.name)
                    act.append(p.idx)
                    gs = grab(s.gpus_per_replica)
                    if gs is None:  # a pool too small for the minimum: it waits like any replica
                        pending_inf.append(p.idx)
                        continue
                    bind(p, gs, 0)
                    p.ready_min = -1
                continue
            if want < len(act):
                def order(i: int) -> tuple[int, int]:
                    p = pods[i]
                    state = 0 if p.gpu < 0 else (1 if p.ready_min > t else 2)
                    return (state, -i)
                drop = sorted(act, key=order)[: len(act) - want]
                for i in drop:
                    release(pods[i], t)
                    act.remove(i)
                    if i in pending_inf:
                        pending_inf.remove(i)
            elif want > len(act):
                for _ in range(want - len(act)):
                    p = new_pod(name=f"{s.name}-{RS_HASH.get(s.name, 'abc')}-{_suffix(rng)}", workload=s.name,
                                namespace=s.namespace, container=s.name, klass="inference",
                                created_by_kind="ReplicaSet", created_by_name=f"{s.name}-{RS_HASH.get(s.name, 'abc')}",
                                priority_class="inference-high", created_min=t, end_min=n_min, service=s.name)
                    act.append(p.idx)
                    pending_inf.append(p.idx)
        # 3. bind pending replicas (inference-high is scheduled before batch is admitted)
        if pending_inf:
            still_p = []
            bound: dict[str, int] = {}
            for i in pending_inf:
                p = pods[i]
                svc = svc_by[p.service]
                gs = grab(svc.gpus_per_replica)  # a multi-GPU replica binds all at once, or waits
                if gs is not None:
                    bind(p, gs, t)
                    draws = warmup_draws.get(svc.name)
                    j = bound[svc.name] = bound.get(svc.name, -1) + 1
                    p.ready_min = t + (int(draws[t, j % draws.shape[1]]) if draws is not None else svc.warmup_min)
                else:
                    still_p.append(i)
            pending_inf = still_p
        # 4. Kueue admission, best-effort FIFO
        while next_job < len(jobs) and jobs[next_job].submit_min <= t:
            queue.append(jobs[next_job])
            next_job += 1
        if queue and (window is None or t < change_min or in_window(t)):
            waiting = []
            for j in queue:
                avail = len(free_shr) - j.leave_free
                if avail >= j.gpus_min:
                    g_n = min(j.gpus_max, avail)
                    idxs = []
                    workers = j.gpus_max > j.gpus_min
                    for k in range(g_n):
                        name = f"{j.job}-worker-{k}" if workers else f"{j.job}-{k}"
                        p = new_pod(name=name, workload=j.job, namespace=j.namespace, container="trainer",
                                    klass="batch", created_by_kind="Job", created_by_name=j.job,
                                    priority_class=j.priority_class, created_min=t,
                                    end_min=n_min, job_id=j.job_id)
                        bind(p, [take(free_shr)], t)
                        idxs.append(p.idx)
                    end = min(t + j.duration_min, n_min)
                    rec = {"id": j.job_id, "workload": j.job, "namespace": j.namespace, "team": j.team,
                           "gpus": g_n, "submit_min": j.submit_min, "start_min": t, "end_min": end,
                           "pods": idxs}
                    records.append(rec)
                    running_jobs.append((end, idxs, rec))
                    admitted += 1
                else:
                    waiting.append(j)
            queue = waiting
        # 5. record the minute
        holders[t] = holder
        k_pending[t] = len(queue)
        k_active[t] = len(running_jobs)
        k_total[t] = admitted
        for s in svcs:
            act = active[s.name]
            current[s.name][t] = len(act)
            rd = [i for i in act if pods[i].gpu >= 0 and pods[i].ready_min <= t]
            ready[s.name][t] = len(rd)
            srv = [i for i in rd if pods[i].ready_min < t]
            srv = srv[: rmax[s.name]]
            serving[s.name][t, : len(srv)] = srv
    return PoolRun(pods=pods, holders=holders, desired=desired, current=current, ready=ready,
                   serving=serving, kueue_pending=k_pending, kueue_active=k_active,
                   kueue_admitted_total=k_total, jobs=records)


DEV_USERS = ("alice", "bruno", "chen", "dana")


def plan_dev_pods(topo: Topology, n_min: int, rng: np.random.Generator, first_idx: int) -> list[Pod]:
    """Development pods outside the autoscaled pool: notebooks on the time-sliced GPU (weekdays,
    working hours, one per user) and long-lived pods on every MIG instance (one of which
    dcgm-exporter cannot map to its pod)."""
    pods: list[Pod] = []
    days = n_min // 1440
    ts_gpu = next(g for g in topo.gpus if g.role == "timeslice")
    for d in range(days):
        if d % 7 >= 5:
            continue
        for u, user in enumerate(DEV_USERS):
            if rng.random() < 0.2:
                continue
            a = d * 1440 + int(rng.uniform(7.5, 10.0) * 60)
            b = min(n_min, d * 1440 + int(rng.uniform(16.0, 19.5) * 60))
            pods.append(Pod(idx=first_idx + len(pods), name=f"dev-notebook-{user}-{d:02d}", workload=f"dev-notebook-{user}",
                            namespace="dev", container="notebook", klass="other", created_by_kind="<none>",
                            created_by_name="<none>", priority_class="dev-low", created_min=a, end_min=b,
                            gpu=ts_gpu.index, scheduled_min=a, resource="nvidia_com_gpu_shared"))
    k = 0
    for g in topo.gpus:
        for profile, gi in g.mig:
            hide = k == 4
            pods.append(Pod(idx=first_idx + len(pods), name=f"dev-notebook-mig-{k}", workload=f"dev-notebook-mig-{k}",
                            namespace="dev", container="notebook", klass="other", created_by_kind="<none>",
                            created_by_name="<none>", priority_class="dev-low", created_min=0, end_min=n_min,
                            gpu=g.index, scheduled_min=0, resource="nvidia_com_mig_" + profile.replace(".", "_").replace("-", "_"),
                            mig=(profile, gi), hide_pod_labels=hide))
            k += 1
    return pods
