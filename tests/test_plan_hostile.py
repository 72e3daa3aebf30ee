"""Plans that cannot hurt a cluster (issue 43): hostile team names make valid Kubernetes names with
the mapping listed, no plan writes a system namespace as a Namespace object (``kubectl delete -f``
on the plan would delete it) nor, unasked, as a queue's home, and no team name adds HTML, a
heading or a YAML-looking line to the README, through the library and through the CLI."""

from __future__ import annotations

import doctest
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
import tomli_w
import yaml

from analytics.plan import make_plan, write_plan
from analytics.whatif import POLICIES, PRESETS, scenario_to_toml
from analytics.whatif.params import BatchParams
from test_plan import KAI_CRD, _schema, check_cel, unknown_fields

ROOT = Path(__file__).resolve().parent.parent
# Kubernetes's own rules, written here rather than imported, so the test does not trust the code.
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
NEWLINE_TEAM = "x\n# heading\nkind: Secret"
IMG_TEAM = "`<img src=x onerror=alert(1)>`"
BREAKS_TEAM = "1. r\rs\u2028t\x85u\u202ev"  # what some viewers (and str.splitlines) break a line at
HOSTILE = ["default", "Team A", "Team_A", "a" * 100, NEWLINE_TEAM, IMG_TEAM, 7, "kube-public",
           "pipe | cell", "[x](http://evil.example/p.png)", BREAKS_TEAM]
HEADINGS = {"## What each file enforces", "## Apply in this order", "## Team names", "## System namespaces",
            "## Policies and their objects"}


def _hostile(service_team: object = "kube-system") -> object:
    scn = PRESETS["morning-ramp"](2)
    base = scn.batch.jobs[0]
    jobs = tuple(replace(base, name=f"j{i}", team=team) for i, team in enumerate(HOSTILE))
    return replace(scn, service=replace(scn.service, team=service_team), batch=BatchParams(jobs=jobs))


def _read(out: Path) -> list[dict]:
    return [d for p in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def _is_system(ns: str) -> bool:
    return ns == "default" or ns.startswith("kube-")


def _check_yaml(objs: list[dict]) -> None:
    """No system Namespace, every name a DNS-1123 label, every label value valid, no stray kind."""
    kinds = {"Namespace", "ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue", "CronJob",
             "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Queue"}
    for obj in objs:
        assert obj["kind"] in kinds, obj["kind"]
        meta = obj["metadata"]
        assert set(meta) <= {"name", "namespace", "labels"}, meta
        assert isinstance(meta["name"], str) and DNS1123_LABEL.match(meta["name"]) and len(meta["name"]) <= 63
        if "namespace" in meta:
            assert DNS1123_LABEL.match(meta["namespace"]) and len(meta["namespace"]) <= 63
        for value in meta["labels"].values():
            assert LABEL_VALUE.match(value) and len(value) <= 63
        if obj["kind"] == "Namespace":
            assert not _is_system(meta["name"]), meta["name"]
        for sel in (obj.get("spec", {}).get("nodeLabels") or {}).values():
            assert LABEL_VALUE.match(sel) and len(sel) <= 63


def _check_readme(text: str, teams: int) -> None:
    assert "<img" not in text and "<" not in text.replace("&lt;", "")
    heads = [line for line in text.splitlines() if line.startswith("#")]
    assert heads[0].startswith("# Tidelens plan: ") and set(heads[1:]) <= HEADINGS, heads
    assert not any(line.lstrip().startswith(("kind:", "# heading", "`")) for line in text.splitlines())
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) == teams  # one row a team: no name split a row or added one
    # every row has three cells: a '|' in a name is escaped, never a cell border
    assert all(len(re.split(r"(?<!\\)\|", row)) == 5 for row in rows), rows


@pytest.mark.parametrize("policy", POLICIES)
def test_hostile_team_names_make_a_plan_that_cannot_hurt(policy: str, tmp_path: Path) -> None:
    image = "registry.example/kubectl:1\n---\nkind: Secret\nmetadata: {name: x}"  # a hostile --kubectl-image
    plan = make_plan(_hostile(), policy, kubectl_image=image)
    write_plan(plan, tmp_path)
    objs = _read(tmp_path)
    assert objs == [o for name in sorted(plan.files) for o in plan.files[name]]  # YAML holds the values, no more
    _check_yaml(objs)
    for obj in objs:  # still valid against Kueue's CRDs with the mapped names
        if obj["apiVersion"].startswith("kueue.x-k8s.io/"):
            schema = _schema(obj["kind"])
            jsonschema.validate(obj, schema)
            assert unknown_fields(obj, schema) == []
            check_cel(obj)
    homes = {o["metadata"]["namespace"] for o in objs if o["kind"] == "LocalQueue"}
    assert homes and not any(_is_system(ns) for ns in homes)  # skipped, not a queue's home
    assert set(plan.system) == {"kube-system", "default", "kube-public"}
    # every other team keeps a queue in its own namespace (none dropped, none merged)
    others = {t: ns for t, ns in plan.names.items() if t not in plan.system}
    assert len(set(others.values())) == len(others) == len(HOSTILE) - 2
    assert homes == set(others.values())
    readme = (tmp_path / "README.md").read_text()
    _check_readme(readme, teams=len(HOSTILE) + 1)
    assert "System namespaces" in readme and "--allow-system-namespaces" in readme


def test_names_are_mapped_deterministically_and_listed(tmp_path: Path) -> None:
    plan = make_plan(_hostile(), "preemption")
    names = plan.names
    assert names["7"] == "7" and names["Team A"] != names["Team_A"]
    assert names["Team A"].startswith("team-a") and names["Team_A"].startswith("team-a")
    assert len(names["a" * 100]) == 63 and names["a" * 100] != "a" * 63
    assert set(plan.renamed) == {"Team A", "Team_A", "a" * 100, NEWLINE_TEAM, IMG_TEAM, "pipe | cell",
                                 "[x](http://evil.example/p.png)", BREAKS_TEAM}
    # the same teams in another order map to the same names
    scn = _hostile()
    shuffled = replace(scn, batch=BatchParams(jobs=tuple(reversed(scn.batch.jobs))))
    assert make_plan(shuffled, "preemption").names == names
    readme = plan.readme
    assert "| x\\\\n\\# heading\\\\nkind\\: Secret | `x-heading-kind-secret` |" in readme
    assert "| \\`&lt;img src=x onerror=alert\\(1\\)&gt;\\` | `img-src-x-onerror-alert-1` |" in readme
    assert "| pipe \\| cell | `pipe-cell` |" in readme


def test_a_system_namespace_is_a_queue_home_only_when_asked(tmp_path: Path) -> None:
    plan = make_plan(_hostile(), "tidal", allow_system_namespaces=True)
    write_plan(plan, tmp_path)
    objs = _read(tmp_path)
    _check_yaml(objs)  # still no Namespace object for any of them
    homes = {o["metadata"]["namespace"]: o["spec"]["clusterQueue"] for o in objs if o["kind"] == "LocalQueue"}
    assert homes["kube-system"] == "inference" and homes["default"] == homes["kube-public"] == "batch"
    readme = (tmp_path / "README.md").read_text()
    assert "its LocalQueue is written there" in readme and "skipped" not in readme


@pytest.mark.parametrize("policy", ["shared", "tidal", "partitioned"])
def test_kai_plans_write_no_system_namespace(policy: str, tmp_path: Path) -> None:
    schema = next(v for v in yaml.safe_load(KAI_CRD.read_text())["spec"]["versions"]
                  if v["name"] == "v2")["schema"]["openAPIV3Schema"]
    for allow in (False, True):
        plan = make_plan(_hostile(), policy, scheduler="kai", allow_system_namespaces=allow)
        write_plan(plan, tmp_path / str(allow))
        objs = _read(tmp_path / str(allow))
        _check_yaml(objs)
        for q in (o for o in objs if o["kind"] == "Queue"):
            jsonschema.validate(q, schema)
        readme = (tmp_path / str(allow) / "README.md").read_text()
        _check_readme(readme, teams=len(HOSTILE) + 1)
        system = readme.split("## System namespaces")[1].split("## Policies")[0]
        assert "KAI's queues are cluster-wide" in system and "LocalQueue" not in system


def test_only_system_teams_write_no_empty_file(tmp_path: Path) -> None:
    scn = _hostile("default")
    scn = replace(scn, batch=BatchParams(jobs=(replace(scn.batch.jobs[0], team="kube-system"),)))
    written = write_plan(make_plan(scn, "shared"), tmp_path)
    assert {p.name for p in written} == {"10-kueue-flavors.yaml", "20-kueue-priorities.yaml",
                                         "30-kueue-clusterqueues.yaml", "README.md"}


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "analytics", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_cli_plans_a_hostile_scenario_file_cleanly(tmp_path: Path) -> None:
    import tomllib

    doc = tomllib.loads(scenario_to_toml(_hostile("kube-system")))
    assert 7 in [j["team"] for j in doc["batch"]["jobs"]]  # an integer team, as TOML can hold
    scenario = tmp_path / "hostile.toml"
    scenario.write_text(tomli_w.dumps(doc))
    out = tmp_path / "plan"
    run = _cli(["plan", "--scenario", str(scenario), "--policy", "tidal", "--out", str(out)], tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert "team 'kube-system': namespace kube-system is Kubernetes's own (kube-*); skipped" in run.stdout
    assert "--allow-system-namespaces" in run.stdout
    assert "team 'x\\n# heading\\nkind: Secret' -> namespace x-heading-kind-secret" in run.stdout
    assert not any(line.startswith(("# heading", "kind:")) for line in run.stdout.splitlines())
    _check_yaml(_read(out))
    _check_readme((out / "README.md").read_text(), teams=len(HOSTILE) + 1)
    run = _cli(["plan", "--scenario", str(scenario), "--policy", "tidal", "--out", str(out), "--json",
                "--allow-system-namespaces"], tmp_path)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["names"]["7"] == "7" and got["system_namespaces"]["default"] == "the cluster's default namespace"
    assert got["allow_system_namespaces"] is True
    assert any(o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == "kube-system" for o in _read(out))
    _check_yaml(_read(out))


def test_doctests_of_the_names_and_the_escaping() -> None:
    import analytics.plan.names
    import analytics.plan.windows
    import analytics.text

    for module in (analytics.plan.names, analytics.plan.windows, analytics.text):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_each_mapping_says_why() -> None:
    from analytics.plan import map_teams

    m = map_teams(["", "Équipe Été", "a" * 70, "kube-system", "Kube System", "tidelens-system"],
                  taken=("tidelens-system",))
    assert m.names[""].startswith("team-") and m.changed[""].startswith("no letter or digit")
    assert m.names["Équipe Été"] == "equipe-ete" and m.changed["Équipe Été"].startswith("not a valid")
    assert m.changed["a" * 70].startswith("longer than 63")
    # the exact spelling keeps the contested name; the other is hashed, and still a system one
    assert m.names["kube-system"] == "kube-system" and "kube-system" not in m.changed
    assert m.names["Kube System"].startswith("kube-system-") and "another team's" in m.changed["Kube System"]
    assert set(m.system) == {"kube-system", "Kube System"}
    assert m.names["tidelens-system"] != "tidelens-system"  # the plan's own namespace stays its own
    assert m.changed["tidelens-system"].startswith("the plan's own namespace")


@pytest.mark.parametrize("scheduler", ["kueue", "kai"])
def test_the_readme_names_only_what_the_plan_writes(scheduler: str, tmp_path: Path) -> None:
    for policy in POLICIES:
        plan = make_plan(_hostile(), policy, scheduler=scheduler)
        readme = plan.readme
        named = set(re.findall(r"\b\d\d-[a-z0-9-]+\.yaml\b", readme))
        assert named == set(plan.files), (policy, named ^ set(plan.files))  # each file said, none more
        spaces = {o["metadata"]["name"] for o in plan.objects() if o["kind"] == "Namespace"}
        table = re.findall(r"^\| .* \| `([a-z0-9-]+)` \|", readme, flags=re.M)
        assert set(table) <= spaces | set(plan.names[t] for t in plan.system)
        assert ("tidelens-system" in readme) == ("tidelens-system" in spaces), policy
