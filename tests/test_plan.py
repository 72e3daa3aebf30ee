"""``tidelens plan`` and analytics.plan: the chosen policy as manifests whose numbers are the
what-if's, valid against Kueue's own CRDs (tests/fixtures/kueue/, Apache-2.0, see SOURCES.md),
with the CRDs' CEL rules asserted, and the MIG and time-slicing configs in their documented format."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
import yaml

from analytics.cli import main
from analytics.plan import COHORT, GPU, k8s_name, make_plan, plan_zip, write_plan
from analytics.whatif import POLICIES, PRESETS, reservation
from analytics.whatif.mig import placements
from analytics.whatif.params import BatchJob, BatchParams

CRDS = Path(__file__).parent / "fixtures" / "kueue"  # and fixtures/kai: KAI Scheduler's Queue CRD
KINDS = {"ClusterQueue": "clusterqueues", "LocalQueue": "localqueues", "ResourceFlavor": "resourceflavors",
         "WorkloadPriorityClass": "workloadpriorityclasses"}


def _schema(kind: str) -> dict:
    crd = yaml.safe_load((CRDS / f"kueue.x-k8s.io_{KINDS[kind]}.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    assert version["storage"] is True  # v1beta2 is the version the API server stores
    return version["schema"]["openAPIV3Schema"]


def unknown_fields(obj, schema, path="") -> list[str]:
    """Fields the schema does not know: the API server would prune them silently (a typo'd
    ``borrowinglimit`` would just vanish), so they are an error here."""
    out: list[str] = []
    if isinstance(obj, dict):
        props = schema.get("properties")
        if props is None or schema.get("x-kubernetes-preserve-unknown-fields"):
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                for k, v in obj.items():
                    out += unknown_fields(v, extra, f"{path}.{k}")
            return out
        for k, v in obj.items():
            if k not in props:
                out.append(f"{path}.{k}")
            else:
                out += unknown_fields(v, props[k], f"{path}.{k}")
    elif isinstance(obj, list) and "items" in schema:
        for i, v in enumerate(obj):
            out += unknown_fields(v, schema["items"], f"{path}[{i}]")
    return out


def check_cel(obj: dict) -> None:
    """The ClusterQueue CRD's x-kubernetes-validations that bear on what a plan writes."""
    if obj["kind"] != "ClusterQueue":
        return
    spec = obj["spec"]
    for rg in spec["resourceGroups"]:
        # flavors must have the same number of resources as the coveredResources
        assert all(len(f["resources"]) == len(rg["coveredResources"]) for f in rg["flavors"])
        if "cohortName" not in spec:  # borrowingLimit must be nil when cohort is empty
            assert all("borrowingLimit" not in r for f in rg["flavors"] for r in f["resources"])
    pre = spec.get("preemption", {})
    # reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never
    assert not (pre.get("reclaimWithinCohort", "Never") == "Never"
                and pre.get("borrowWithinCohort", {}).get("policy", "Never") != "Never")


# Every CEL rule of the four CRDs (v1beta2), and how a plan meets it: a rule Kueue adds makes this
# test fail until someone says how plans meet it.
CEL_RULES = {
    "!has(self.cohortName) && has(self.resourceGroups)": "checked: no borrowingLimit without a cohort",
    "!has(self.preference) ||": "n/a: plans set no flavorFungibility",
    "!(self.reclaimWithinCohort == 'Never'": "checked: borrowWithinCohort only with reclaim",
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))": "checked",
    "self == oldSelf": "n/a: an update rule (LocalQueue.spec.clusterQueue is immutable)",
    "!has(self.topologyName)": "n/a: plans set no topologyName",
    "!has(oldSelf.topologyName)": "n/a: an update rule",
    "self.all(x, x.effect in": "n/a: plans set no nodeTaints",
    "self.all(x, !has(x.key)": "n/a: plans set no tolerations",
    "self.all(x, has(x.tolerationSeconds)": "n/a: plans set no tolerations",
    "self.all(x, !has(x.operator)": "n/a: plans set no tolerations",
    "self.all(x, has(x.operator) &&": "n/a: plans set no tolerations",
    "self.all(x, !has(x.effect)": "n/a: plans set no tolerations",
}


def test_every_cel_rule_of_the_crds_is_accounted_for() -> None:
    rules = []

    def walk(node):
        if isinstance(node, dict):
            rules.extend(r["rule"] for r in node.get("x-kubernetes-validations", []))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for kind in KINDS:
        walk(_schema(kind))
    unaccounted = [r for r in rules if not any(r.startswith(k) for k in CEL_RULES)]
    assert rules and not unaccounted, unaccounted
    # and the plans never set what the n/a rules guard
    for policy in POLICIES:
        for obj in make_plan(PRESETS["morning-ramp"](2), policy).objects():
            spec = obj.get("spec", {})
            assert not {"topologyName", "nodeTaints", "tolerations", "flavorFungibility"} & set(spec)


def _read(out: Path) -> dict[str, list[dict]]:
    return {p.name: [d for d in yaml.safe_load_all(p.read_text()) if d] for p in sorted(out.glob("*.yaml"))}


def _queue(files: dict, name: str) -> dict:
    return next(o for o in files["30-kueue-clusterqueues.yaml"] if o["metadata"]["name"] == name)


def _quota(cq: dict) -> dict:
    return cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]


SCENARIOS = {"morning-ramp": lambda: PRESETS["morning-ramp"](2), "tidal-a100": lambda: PRESETS["tidal-a100"](2)}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("preset", sorted(SCENARIOS))
def test_every_object_is_valid_against_the_kueue_crds(policy: str, preset: str, tmp_path: Path) -> None:
    scn = SCENARIOS[preset]()
    write_plan(make_plan(scn, policy), tmp_path)
    files = _read(tmp_path)
    kueue = [o for objs in files.values() for o in objs if o["apiVersion"].startswith("kueue.x-k8s.io/")]
    assert {o["kind"] for o in kueue} >= {"ClusterQueue", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass"}
    for obj in kueue:
        assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        schema = _schema(obj["kind"])
        jsonschema.validate(obj, schema)
        assert unknown_fields(obj, schema) == [], obj["metadata"]["name"]
        check_cel(obj)
        assert len(obj["metadata"]["name"]) <= 63
    # every LocalQueue points at a ClusterQueue the plan writes
    queues = {o["metadata"]["name"] for o in kueue if o["kind"] == "ClusterQueue"}
    assert {o["spec"]["clusterQueue"] for o in kueue if o["kind"] == "LocalQueue"} <= queues
    flavors = {o["metadata"]["name"] for o in kueue if o["kind"] == "ResourceFlavor"}
    assert {f["name"] for o in kueue if o["kind"] == "ClusterQueue"
            for rg in o["spec"]["resourceGroups"] for f in rg["flavors"]} <= flavors


@pytest.mark.parametrize("policy", ["polite", "preemption", "tidal", "partitioned", "mig"])
def test_the_numbers_read_back_are_the_what_ifs(policy: str, tmp_path: Path) -> None:
    scn = PRESETS["morning-ramp"](2)
    scn = replace(scn, pool=replace(scn.pool, reservation_gpus=-1, headroom=0.25))  # automatic
    reserved, why = reservation(scn)
    assert why != "set"
    write_plan(make_plan(scn, policy), tmp_path)
    files = _read(tmp_path)
    gpus = scn.pool.gpus
    inference = _quota(_queue(files, "inference"))
    if policy == "mig":
        from analytics.whatif.policies import capacity

        layout = capacity(scn, "mig").layout
        assert inference["name"] == f"nvidia.com/mig-{layout.profile.name}"
        assert inference["nominalQuota"] == reserved * layout.instances
        cfg = yaml.safe_load(files["80-mig-parted.yaml"][0]["data"]["config.yaml"])
        assert cfg["version"] == "v1"
        devices = cfg["mig-configs"]["tidelens-inference"][0]["mig-devices"]
        assert devices == {layout.profile.name: layout.instances}
        assert tuple([layout.profile.name] * layout.instances) in placements(scn.pool.gpu_model)
    else:
        assert inference["name"] == GPU and inference["nominalQuota"] == reserved
    batch = _quota(_queue(files, "batch"))
    if policy == "partitioned":
        soft = _quota(_queue(files, "soft-shared"))["nominalQuota"]
        assert soft == round(scn.pool.split_b * gpus)
        assert inference["lendingLimit"] == 0 and inference["borrowingLimit"] == soft
        assert batch["borrowingLimit"] == 0 and batch["lendingLimit"] == 0
        assert reserved + soft + batch["nominalQuota"] == gpus  # the quotas are the pool
    else:
        assert reserved + batch["nominalQuota"] == gpus
    assert all(o["spec"].get("cohortName") == COHORT for o in files["30-kueue-clusterqueues.yaml"])
    if policy in ("polite", "tidal", "mig"):
        cron = {o["metadata"]["name"]: o["spec"] for o in files["60-window-cronjobs.yaml"]}
        leave, open_ = cron["tidelens-batch-leave"], cron["tidelens-batch-open"]
        release = scn.pool.polite_release_hour if policy == "polite" else scn.pool.tidal_end_hour
        start = (min(j.start_hour for j in scn.batch.jobs) if policy == "polite" else scn.pool.tidal_start_hour)
        assert leave["schedule"] == f"{round(release % 1 * 60)} {int(release)} * * *"
        assert open_["schedule"] == f"{round(start % 1 * 60)} {int(start)} * * *"
        assert leave["timeZone"] == "UTC"  # the model's hours are UTC hours
        cmd = leave["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]
        assert cmd[:4] == ["kubectl", "patch", "clusterqueue", "batch"]
        assert json.loads(cmd[-1]) == {"spec": {"stopPolicy": "HoldAndDrain"}}
        rbac = {o["kind"]: o for o in files["50-window-rbac.yaml"]}
        assert rbac["ClusterRole"]["rules"][0]["verbs"] == ["get", "patch"]
    if policy in ("preemption", "tidal", "partitioned", "mig"):
        pre = _queue(files, "inference")["spec"]["preemption"]
        assert pre["reclaimWithinCohort"] == "Any" and pre["withinClusterQueue"] == "LowerPriority"
    else:
        assert "preemption" not in _queue(files, "inference")["spec"]  # polite: nothing preempted


def test_time_slicing_writes_the_device_plugin_config_and_counts_replicas(tmp_path: Path) -> None:
    scn = PRESETS["morning-ramp"](2)
    scn = replace(scn, pool=replace(scn.pool, timeslice_replicas=4))
    write_plan(make_plan(scn, "timeslice"), tmp_path)
    files = _read(tmp_path)
    cfg = yaml.safe_load(files["70-device-plugin-timeslicing.yaml"][0]["data"]["tidelens"])
    assert cfg["version"] == "v1"
    assert cfg["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert _quota(_queue(files, "gpu-pool"))["nominalQuota"] == 4 * scn.pool.gpus  # in replicas
    readme = (tmp_path / "README.md").read_text()
    assert "time-sliced GPU replicas" in readme
    # the README says how to point the GPU Operator's device plugin at the ConfigMap it writes
    cm = files["70-device-plugin-timeslicing.yaml"][0]
    assert f"devicePlugin.config.name={cm['metadata']['name']}" in readme
    assert f"devicePlugin.config.default={next(iter(cm['data']))}" in readme


def test_the_mig_readme_says_how_the_gpu_operator_uses_the_config(tmp_path: Path) -> None:
    write_plan(make_plan(PRESETS["morning-ramp"](2), "mig"), tmp_path)
    cm = _read(tmp_path)["80-mig-parted.yaml"][0]
    assert list(cm["data"]) == ["config.yaml"]  # the key the MIG manager reads
    readme = (tmp_path / "README.md").read_text()
    assert "mig.strategy=mixed" in readme
    assert f"migManager.config.name={cm['metadata']['name']}" in readme


def test_team_names_are_sanitised_and_listed(tmp_path: Path) -> None:
    scn = PRESETS["morning-ramp"](2)
    jobs = (BatchJob(name="a", team="ML_Research Team!", gpus=8), BatchJob(name="b", team="ml-research-team", gpus=8),
            BatchJob(name="c", team="<script>x</script>", gpus=8))
    scn = replace(scn, batch=BatchParams(jobs=jobs))
    plan = make_plan(scn, "preemption")
    write_plan(plan, tmp_path)
    names = plan.names
    # a collision: the team spelled that way keeps the name, the other gets a hash of its own
    assert names["ml-research-team"] == "ml-research-team"
    assert names["ML_Research Team!"] == "ml-research-team-" + hashlib.sha1(b"ML_Research Team!").hexdigest()[:10]
    assert names["<script>x</script>"] == "script-x-script"
    local = {o["metadata"]["namespace"] for o in _read(tmp_path)["40-kueue-localqueues.yaml"]}
    assert set(names.values()) == local  # no team dropped
    readme = (tmp_path / "README.md").read_text()
    assert (f"| ML\\_Research Team\\! | `{names['ML_Research Team!']}` | 'ml-research-team' is "
            "another team's\\: a hash of the name appended |") in readme
    assert "| &lt;script&gt;x&lt;/script&gt; | `script-x-script` | not a valid Kubernetes name" in readme
    assert "| ml-research-team | `ml-research-team` | unchanged |" in readme
    assert k8s_name("a" * 100) != k8s_name("a" * 101) and len(k8s_name("a" * 100)) == 63


def test_readme_says_what_each_file_enforces(tmp_path: Path) -> None:
    from analytics.whatif import simulate

    scn = PRESETS["morning-ramp"](2)
    written = write_plan(make_plan(scn, "tidal"), tmp_path)
    readme = (tmp_path / "README.md").read_text()
    modelled = simulate(scn, "tidal").summary  # the outcome the plan carries, as modelled
    assert f"`modelled_violation_minutes`: {round(modelled.violation_minutes, 1)}" in readme
    assert f"`modelled_batch_goodput_gpu_hours`: {round(modelled.batch_goodput_gpu_hours, 1)}" in readme
    for p in written:
        if p.suffix == ".yaml":
            assert p.name in readme, p.name
    assert "HoldAndDrain" in readme and "Tidelens's convention" in readme
    assert "Apply in this order" in readme


def test_cli_plan_writes_the_folder_and_its_numbers(tmp_path: Path, capsys) -> None:
    out = tmp_path / "plan"
    assert main(["plan", "--preset", "morning-ramp", "--days", "2", "--policy", "partitioned",
                 "--reservation-gpus", "30", "--out", str(out), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["numbers"]["reservation_gpus"] == 30 and got["numbers"]["reservation_source"] == "set"
    assert _quota(_queue(_read(out), "inference"))["nominalQuota"] == 30
    assert (out / "README.md").exists()
    with pytest.raises(SystemExit) as stop:  # argparse's own refusal
        main(["plan", "--preset", "morning-ramp", "--policy", "nope", "--out", str(out)])
    assert stop.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_plan_from_a_store_uses_the_what_ifs_reservation(tmp_path: Path, capsys, monkeypatch,
                                                             morning_db: Path) -> None:
    from apptest_helpers import isolated_cli

    isolated_cli(monkeypatch, tmp_path)
    db = morning_db
    assert main(["whatif", "--db", str(db), "--json", "--policy", "partitioned"]) == 0
    whatif = json.loads(capsys.readouterr().out)["scenario"]
    assert main(["plan", "--db", str(db), "--policy", "partitioned", "--out", str(tmp_path / "p"),
                 "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["numbers"]
    assert plan["reservation_gpus"] == whatif["reservation_gpus"]
    assert plan["pool_gpus"] == whatif["pool_gpus"] == 64


def test_the_zip_holds_the_folder() -> None:
    import io
    import zipfile

    plan = make_plan(PRESETS["morning-ramp"](2), "mig")
    names = zipfile.ZipFile(io.BytesIO(plan_zip(plan))).namelist()
    assert "tidelens-plan-mig/README.md" in names and "tidelens-plan-mig/80-mig-parted.yaml" in names


KAI_CRD = Path(__file__).parent / "fixtures" / "kai" / "scheduling.run.ai_queues.yaml"


@pytest.mark.parametrize("policy", POLICIES)
def test_kai_queues_are_valid_and_add_up(policy: str, tmp_path: Path) -> None:
    crd = yaml.safe_load(KAI_CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v2")
    assert version["storage"] is True
    schema = version["schema"]["openAPIV3Schema"]
    scn = PRESETS["morning-ramp"](2)
    plan = make_plan(scn, policy, scheduler="kai")
    write_plan(plan, tmp_path)
    files = _read(tmp_path)
    assert not any(name.startswith(("10-kueue", "30-kueue", "60-")) for name in files)  # no Kueue objects
    queues = files["10-kai-queues.yaml"]
    for q in queues:
        assert q["apiVersion"] == "scheduling.run.ai/v2" and q["kind"] == "Queue"
        jsonschema.validate(q, schema)
        assert unknown_fields(q, schema) == [], q["metadata"]["name"]
    by_name = {q["metadata"]["name"]: q["spec"] for q in queues}
    children = [q for q in by_name.values() if q.get("parentQueue") == COHORT]
    # quotas are the pool, counted as the nodes advertise nvidia.com/gpu (replicas when time-sliced)
    units = scn.pool.gpus * (scn.pool.timeslice_replicas if policy == "timeslice" else 1)
    assert by_name[COHORT]["resources"]["gpu"]["quota"] == units
    assert sum(c["resources"]["gpu"]["quota"] for c in children) == units
    if policy in ("shared", "timeslice"):  # the same count as the Kueue plan's queue
        kueue = make_plan(scn, policy).files["30-kueue-clusterqueues.yaml"][0]
        assert _quota(kueue)["nominalQuota"] == units
    if policy not in ("shared", "timeslice"):
        reserved, _ = reservation(scn)
        assert by_name["inference"]["resources"]["gpu"]["quota"] == reserved
    readme = (tmp_path / "README.md").read_text()
    assert "10-kai-queues.yaml" in readme and "KAI Scheduler" in readme
    if policy in ("polite", "tidal", "mig"):
        assert "Not enforced under KAI: the batch window" in readme  # said, not silently dropped
