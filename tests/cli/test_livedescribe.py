"""``describe KIND/NAME`` and ``describe KIND`` (webhook.cli.livedescribe, webhook.cluster.reads) against
the fake API server: kind resolution through discovery, the cluster's Kartas over the catalog,
pods found through owner references and placed under instances, phases, resources, and the
one-line failures with their exit codes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakeapi import ROOT, FakeAPI, discovery_doc, karta, stored

from webhook.cli import main as cli
from webhook.cli.livedescribe_view import age, cpu_text, memory_text, pod_request, quantity

NS = "research"
JOBSETS = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
SAMPLE = ROOT / "catalog/samples/jobset.x-k8s.io-jobset-v1alpha2/leader-workers.yaml"


def kubeconfig(tmp_path: Path, fake: FakeAPI, namespace: str | None = None) -> str:
    ctx: dict[str, Any] = {"cluster": "fake", "user": "me"}
    if namespace:
        ctx["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": fake.host}}],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": ctx}],
        "current-context": "fake",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def serve_discovery(fake: FakeAPI) -> None:
    fake.discovery["/api/v1"] = discovery_doc("v1", [("pods", "Pod", True)])
    fake.discovery["/apis"] = {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": g,
                "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
            }
            for g, v in (("batch", "v1"), ("jobset.x-k8s.io", "v1alpha2"), ("example.com", "v1"))
        ],
    }
    fake.discovery["/apis/batch/v1"] = discovery_doc("batch/v1", [("jobs", "Job", True)])
    js = discovery_doc("jobset.x-k8s.io/v1alpha2", [("jobsets", "JobSet", True)])
    js["resources"][0].update({"singularName": "jobset", "shortNames": ["js"]})
    js["resources"].append({"name": "jobsets/status", "kind": "JobSet", "namespaced": True})
    fake.discovery["/apis/jobset.x-k8s.io/v1alpha2"] = js
    fake.discovery["/apis/example.com/v1"] = discovery_doc(
        "example.com/v1", [("widgets", "Widget", True), ("trainerz", "Trainer", True)]
    )


def pod(name: str, replicated_job: str, owner: dict[str, Any], node: str, ready: bool) -> dict:
    return stored(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NS,
                "labels": {"jobset.sigs.k8s.io/replicatedjob-name": replicated_job},
                "ownerReferences": [
                    {
                        "apiVersion": owner["apiVersion"],
                        "kind": owner["kind"],
                        "name": owner["metadata"]["name"],
                        "uid": owner["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        },
        "300",
    )


@pytest.fixture
def cluster(fake: FakeAPI, tmp_path: Path) -> str:
    """A JobSet ``trainer`` (leader 1 x 4 GPUs, workers 2 x 4 GPUs) whose leader pod hangs off
    a Job and whose worker pods hang off the JobSet; one worker not ready."""
    serve_discovery(fake)
    js = stored(yaml.safe_load(SAMPLE.read_text()), "200")
    js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ]["requests"] = {"cpu": "500m", "memory": "1Gi"}
    js["status"] = {"replicatedJobsStatus": [{"name": "leader", "active": 1}]}
    fake.objects[f"{JOBSETS}/trainer"] = js
    job = stored(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "trainer-leader-0",
                "namespace": NS,
                "ownerReferences": [
                    {
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "name": "trainer",
                        "uid": js["metadata"]["uid"],
                    }
                ],
            },
        },
        "201",
    )
    fake.objects[f"{JOBS}/trainer-leader-0"] = job
    other = copy.deepcopy(js)
    other["metadata"].update({"name": "other", "uid": "other-uid"})
    other.pop("status")
    pods = [
        pod("trainer-leader-0-0", "leader", job, "node-a", True),
        pod("trainer-workers-0-0", "workers", js, "node-b", True),
        pod("trainer-workers-0-1", "workers", js, "node-c", False),
        pod("other-workers-0-0", "workers", other, "node-d", True),
    ]
    fake.collections[PODS] = ("v1", "PodList", {p["metadata"]["name"]: p for p in pods})
    fake.collections[JOBSETS] = (
        "jobset.x-k8s.io/v1alpha2",
        "JobSetList",
        {"trainer": js, "other": other},
    )
    return kubeconfig(tmp_path, fake, namespace=NS)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["describe", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_describe_live_text(cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "jobset/trainer", "--kubeconfig", cluster)
    assert code == 0, err
    assert out.startswith("JobSet/trainer\n  Namespace:   research\n")
    assert "Definition:  jobset-x-k8s-io-jobset-v1alpha2 (catalog)" in out
    assert "JobSet/trainer: 2/3 ready, nodes node-a, node-b, node-c, 12 GPUs" in out
    assert "leader: replicas 1, 1/1 ready, nodes node-a, 4 GPUs" in out
    assert "workers: replicas 2, 1/2 ready, nodes node-b, node-c, 8 GPUs" in out
    assert "Phase: Running\n" in out
    lines = out.splitlines()
    # each pod under its instance, with its node
    at = lines.index("      workers: replicas 2, 1/2 ready, nodes node-b, node-c, 8 GPUs")
    assert lines[at + 1 : at + 3] == [
        "        trainer-workers-0-0: node node-b, ready",
        "        trainer-workers-0-1: node node-c, not ready",
    ]
    assert "        trainer-leader-0-0: node node-a, ready" in lines
    assert "other-workers-0-0" not in out
    head = lines.index(next(x for x in lines if x.startswith("COMPONENT")))
    assert lines[head].split() == ["COMPONENT", "REPLICAS", "GPU", "CPU", "MEMORY"]
    assert lines[head + 1].split() == ["replicatedjob/leader", "1", "4", "0", "0"]
    assert lines[head + 2].split() == ["replicatedjob/workers", "2", "8", "1", "2Gi"]
    assert lines[head + 3].split() == ["TOTAL", "3", "12", "1", "2Gi"]


@pytest.mark.parametrize("kind", ["JobSet", "jobsets", "js", "JOBSET", "jobset.jobset.x-k8s.io"])
def test_kind_as_kubectl_takes_it(
    cluster: str, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, f"{kind}/trainer", "-n", NS, "--kubeconfig", cluster, "-o", "json")
    assert code == 0, err
    v = json.loads(out)
    assert (v["kind"], v["name"], v["namespace"], v["gpus"]) == ("JobSet", "trainer", NS, 12)
    assert v["phases"] == ["Running"] and v["phase"] == "Running"
    assert v["pods"]["ready"] == 2 and v["pods"]["total"] == 3
    [_, rj] = v["components"]
    assert [(i["id"], i["replicas"], i["pods"]["total"]) for i in rj["instances"]] == [
        ("leader", 1, 1),
        ("workers", 2, 2),
    ]
    assert v["resources"]["total"] == {"replicas": 3, "gpus": 12, "cpu": "1", "memory": "2Gi"}
    assert v["definition"]["origin"] == "catalog"


def test_yaml_output(cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "js/trainer", "--kubeconfig", cluster, "-o", "yaml")
    assert code == 0
    assert yaml.safe_load(out)["resources"]["total"]["gpus"] == 12


def test_describe_kind_lists_every_workload(
    cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "jobset", "--kubeconfig", cluster)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["NAME", "PHASE", "READY", "GPUS", "AGE"]
    assert rows[1][:4] == ["other", "Undefined", "1/1", "12"]
    assert rows[2][:4] == ["trainer", "Running", "2/3", "12"]
    code, out, _ = run(capsys, "jobsets", "-n", NS, "--kubeconfig", cluster, "-o", "json")
    data = json.loads(out)
    assert data["count"] == 2 and [i["name"] for i in data["items"]] == ["other", "trainer"]


def test_cluster_karta_wins(
    cluster: str, fake: FakeAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load((ROOT / "catalog/jobset.x-k8s.io-jobset-v1alpha2.yaml").read_text())
    doc["metadata"]["name"] = "my-jobset"
    doc["metadata"]["resourceVersion"] = "1"
    fake.kartas["my-jobset"] = doc
    code, out, err = run(capsys, "jobset/trainer", "--kubeconfig", cluster)
    assert code == 0, err
    assert "Definition:  my-jobset (cluster)" in out


def test_failures_each_get_one_line_and_exit_code(
    cluster: str, fake: FakeAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "jobset/missing", "--kubeconfig", cluster)
    assert (code, out) == (1, "")
    assert err.strip() == (
        'karta-webhook: JobSet "missing" not found in namespace "research" '
        "(jobsets.jobset.x-k8s.io)"
    )
    code, _, err = run(capsys, "nosuchkind/x", "--kubeconfig", cluster)
    assert code == 2
    assert err.strip() == ('karta-webhook: the server doesn\'t have a resource type "nosuchkind"')
    code, _, err = run(capsys, "widgets/w", "--kubeconfig", cluster)
    assert code == 1
    assert err.strip() == (
        "karta-webhook: no definition for example.com/v1 Widget "
        "(no Karta in the catalog or the cluster)"
    )
    fake.forbidden.add(f"{JOBSETS}/trainer")
    code, _, err = run(capsys, "jobset/trainer", "--kubeconfig", cluster)
    assert code == 2 and err.startswith("karta-webhook: forbidden: ")
    assert "is forbidden: User" in err
    assert len(err.splitlines()) == 1
    port = fake.server.server_address[1]
    fake.close()
    code, _, err = run(capsys, "jobset/trainer", "--kubeconfig", cluster)
    assert code == 2
    assert err.startswith(f"karta-webhook: cannot reach the cluster at http://127.0.0.1:{port}")
    assert len(err.splitlines()) == 1
    code, _, err = run(capsys, "jobset/trainer", "--kubeconfig", str(tmp_path / "none"))
    assert code == 2 and "cannot use kubeconfig" in err


def test_cluster_karta_for_a_kind_outside_the_catalog(
    fake: FakeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve_discovery(fake)
    fake.kartas["trainer"] = karta("trainer")
    obj = stored(
        {
            "apiVersion": "example.com/v1",
            "kind": "Trainer",
            "metadata": {"name": "t", "namespace": "team-a"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"app": "t"}},
                    "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 2}}}]},
                }
            },
            "status": {"phase": "Running"},
        },
        "5",
    )
    fake.objects["/apis/example.com/v1/namespaces/team-a/trainerz/t"] = obj
    labelled = stored(
        {
            "metadata": {
                "name": "t-0",
                "namespace": "team-a",
                "labels": {"app": "t", "extra": "1"},
                "ownerReferences": [{"uid": obj["metadata"]["uid"], "kind": "Trainer"}],
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
        "6",
    )
    fake.collections["/api/v1/namespaces/team-a/pods"] = ("v1", "PodList", {"t-0": labelled})
    cfg = kubeconfig(tmp_path, fake)
    code, out, err = run(capsys, "trainer/t", "-n", "team-a", "--kubeconfig", cfg, "-o", "json")
    assert code == 0, err
    v = json.loads(out)
    assert v["definition"] == {
        "name": "trainer",
        "origin": "cluster",
        "source": "cluster:karta/trainer",
    }
    assert v["phases"] == ["Running"]
    assert v["components"][0]["instances"][0]["pods"]["ready"] == 1
    assert v["resources"]["total"]["cpu"] == "2"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["describe"]) == 2
    assert "give KIND[/NAME]" in capsys.readouterr().err
    assert cli.main(["describe", "a/b/c"]) == 2
    assert cli.main(["describe", "jobset/x", "-A"]) == 2
    assert cli.main(["describe", "-f", str(SAMPLE), "-n", "x"]) == 2


def test_file_mode_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["describe", "-f", str(SAMPLE), "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["gpus"] == 12


def test_quantities_and_age() -> None:
    assert quantity("500m") == quantity("0.5") and quantity("1Gi") == 2**30
    assert quantity("1e3") == 1000 and quantity("junk") == 0 and quantity(2) == 2
    assert cpu_text(quantity("1500m")) == "1500m" and cpu_text(quantity("3")) == "3"
    assert memory_text(quantity("1536Mi")) == "1.5Gi"
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
            {"resources": {"limits": {"cpu": "4"}}},
        ],
    }
    assert pod_request(spec, "cpu") == quantity("4.25")
    assert age("junk") == "<unknown>"


def test_describe_shows_each_gang_its_minCount_and_the_podgroups_condition(
    cluster: str, fake: FakeAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    from webhook.workload.gang import group_name

    js = fake.objects[f"{JOBSETS}/trainer"]
    name = group_name("trainer", js["metadata"]["uid"], "jobset")
    code, out, err = run(capsys, "jobset/trainer", "--kubeconfig", cluster)
    assert code == 0, err
    assert f"Gangs:\n  jobset: {name}, minCount 3; no PodGroup" in out
    fake.objects[f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups/{name}"] = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        "status": {
            "conditions": [
                {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable"}
            ]
        },
    }
    code, out, err = run(capsys, "jobset/trainer", "--kubeconfig", cluster)
    assert (
        f"  jobset: {name}, minCount 3; PodGroup minCount 3, "
        "PodGroupInitiallyScheduled=False (Unschedulable)"
    ) in out
    code, out, _ = run(capsys, "jobset/trainer", "--kubeconfig", cluster, "-o", "json")
    [gang] = json.loads(out)["gangs"]
    assert gang["podGroup"]["initiallyScheduled"]["status"] == "False"
