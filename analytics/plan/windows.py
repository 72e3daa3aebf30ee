"""The batch window: Kueue has no time-based quota, so Tidelens's convention is a pair of
CronJobs (``spec.timeZone``) that set the batch ClusterQueue's ``stopPolicy`` to ``HoldAndDrain``
when batch must leave and back to ``None`` when it may run (lowering a quota would not evict
admitted jobs), with the ServiceAccount and RBAC they need and nothing more."""

from __future__ import annotations

import json
from typing import Any

from analytics.plan.objects import meta

SYSTEM_NS = "tidelens-system"
SWITCH_SA = "tidelens-queue-switch"
DEFAULT_KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.34.1"


def cron_of_hour(hour: float) -> str:
    """The daily cron schedule of an hour of day (quarter hours kept).

    >>> cron_of_hour(9.0), cron_of_hour(22.25)
    ('0 9 * * *', '15 22 * * *')
    """
    minutes = int(round((hour % 24) * 60)) % 1440
    return f"{minutes % 60} {minutes // 60} * * *"


def switch(name: str, queue: str, stop: str, hour: float, tz: str, image: str) -> dict[str, Any]:
    """A CronJob that sets ClusterQueue ``queue``'s ``stopPolicy`` to ``stop`` daily at ``hour``."""
    patch = json.dumps({"spec": {"stopPolicy": stop}}, separators=(",", ":"))
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(name, SYSTEM_NS),
            "spec": {"schedule": cron_of_hour(hour), "timeZone": tz, "concurrencyPolicy": "Forbid",
                     "startingDeadlineSeconds": 600, "successfulJobsHistoryLimit": 3,
                     "failedJobsHistoryLimit": 3,
                     "jobTemplate": {"spec": {"backoffLimit": 4, "template": {"spec": {
                         "serviceAccountName": SWITCH_SA, "restartPolicy": "OnFailure",
                         "containers": [{"name": "kubectl", "image": image, "command": [
                             "kubectl", "patch", "clusterqueue", queue, "--type=merge", "-p", patch]}]}}}}}}


def window(leave_hour: float, open_hour: float, tz: str, image: str) -> list[dict[str, Any]]:
    """The two switches of the batch queue: drained at ``leave_hour``, reopened at ``open_hour``."""
    return [switch("tidelens-batch-leave", "batch", "HoldAndDrain", leave_hour, tz, image),
            switch("tidelens-batch-open", "batch", "None", open_hour, tz, image)]


def switch_rbac() -> list[dict[str, Any]]:
    """The switches' ServiceAccount, allowed to get and patch ClusterQueues and nothing else."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(SWITCH_SA, SYSTEM_NS)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(SWITCH_SA),
         "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"],
                    "verbs": ["get", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(SWITCH_SA),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SWITCH_SA},
         "subjects": [{"kind": "ServiceAccount", "name": SWITCH_SA, "namespace": SYSTEM_NS}]},
    ]
