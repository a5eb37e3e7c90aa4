"""Workloads through a real API server with the mutating webhook registered as a user would
(``karta-webhook manifests --url … --policy …``): every bundled sample of a kind whose CRD is
installed (the projects' own CRDs, see ``conftest.workload_crds``) and of the built-in kinds is
created, and the stored object (a GET after the create) is exactly the object the API server
stores without the webhook plus what the offline ``karta-webhook mutate`` predicts.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kapi
import pytest
import yaml
from hooks import (
    Webhook,
    configurations,
    karta,
    register,
    start_webhook,
    unregister,
    wait_until,
)

SAMPLES = kapi.ROOT / "catalog" / "samples"
POLICY = """\
operations: [CREATE, UPDATE]
rules:
- name: kai
  schedulerName: kai-scheduler
  labels:
    kai.scheduler/queue: research
  annotations:
    example.com/owner: "$(workload.name)"
    example.com/component: "$(component)/$(instance)"
"""
#: The namespace the generated configuration leaves alone (``manifests --namespace``):
#: objects created there show what the API server stores without the webhook. Not
#: karta-system, whose "restricted" Pod Security level refuses most sample Pods.
EXCLUDED = "karta-e2e-unmutated"
#: Catalog kinds with no CRD to install here, and why (``hack/workload-crds.txt`` says more).
#: The coverage test below holds this list to what ``workload_crds`` really installed.
BUILTIN_GROUPS = {"", "apps", "batch"}
#: Catalog kinds whose project's Go module the module proxy does not serve (see
#: ``hack/workload-crds.txt``): their samples are skipped above, and only these.
NO_CRD = {
    "apps.nvidia.com/v1alpha1/NIMCache",
    "apps.nvidia.com/v1alpha1/NIMService",
    "batch.volcano.sh/v1alpha1/Job",
    "kubeflow.org/v1/Notebook",
    "milvus.io/v1beta1/Milvus",
    "nvidia.com/v1alpha1/DynamoGraphDeployment",
    "nvidia.com/v1beta1/DynamoGraphDeployment",
    "sparkoperator.k8s.io/v1beta2/SparkApplication",
    # Not a missing module: agent-sandbox v1.0.1's CRD serves v1beta1 only and has the same
    # name as v0.1.1's (v1alpha1), so the suite installs the current one.
    "agents.x-k8s.io/v1alpha1/Sandbox",
}


def _samples() -> list[Path]:
    return sorted(p for p in SAMPLES.rglob("*") if p.suffix in (".yaml", ".json"))


def _doc(path: Path) -> dict[str, Any]:
    return dict(yaml.safe_load(path.read_text()))


def _gvk(doc: dict[str, Any]) -> tuple[str, str, str]:
    group, _, version = doc["apiVersion"].rpartition("/")
    return group, version, doc["kind"]


class Discovery:
    """Resource names and scopes from the API server's discovery (cached per group/version)."""

    def __init__(self, plane: kapi.ControlPlane) -> None:
        self.plane = plane
        self.cache: dict[tuple[str, str], dict[str, tuple[str, bool]]] = {}

    def resource(self, group: str, version: str, kind: str) -> tuple[str, bool] | None:
        key = (group, version)
        if key not in self.cache:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            status, body = self.plane.request("GET", path)
            self.cache[key] = (
                {
                    r["kind"]: (r["name"], r["namespaced"])
                    for r in body["resources"]
                    if "/" not in r["name"]
                }
                if status == 200
                else {}
            )
        return self.cache[key].get(kind)

    def collection(self, doc: dict[str, Any], namespace: str) -> str | None:
        group, version, kind = _gvk(doc)
        found = self.resource(group, version, kind)
        if found is None:
            return None
        plural, namespaced = found
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        return f"{base}/namespaces/{namespace}/{plural}" if namespaced else f"{base}/{plural}"


@pytest.fixture(scope="module")
def discovery(plane: kapi.ControlPlane, workload_crds: dict[str, str]) -> Discovery:
    return Discovery(plane)


@pytest.fixture(scope="module")
def mutating(
    plane: kapi.ControlPlane,
    workload_crds: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    hook = start_webhook(tmp_path_factory.mktemp("serve-mutate"), POLICY, ["--no-kube"])
    if plane.kubectl("get", "namespace", EXCLUDED, check=False).returncode != 0:
        plane.kubectl("create", "namespace", EXCLUDED)
    probe_ns = f"probe-{uuid.uuid4().hex[:8]}"
    plane.kubectl("create", "namespace", probe_ns)
    try:
        register(
            plane,
            configurations(hook, policy=hook.policy, failure_policy="Fail", namespace=EXCLUDED),
        )
        wait_until(
            "the mutating webhook stamps a dry-run Pod",
            lambda: _dry_run_scheduler(plane, probe_ns) == "kai-scheduler",
        )
        yield hook
    finally:
        unregister(plane)
        hook.stop()


def _dry_run_scheduler(plane: kapi.ControlPlane, namespace: str) -> str | None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    status, body = plane.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
    return body["spec"].get("schedulerName") if status == 201 else None


@pytest.fixture(scope="module")
def predicted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The offline prediction for every sample: the object ``karta-webhook mutate -o json``
    prints (one call for all samples, each placed in the namespace ``NS``)."""
    d = tmp_path_factory.mktemp("offline")
    (d / "policy.yaml").write_text(POLICY)
    docs = []
    for path in _samples():
        doc = _doc(path)
        doc["metadata"]["namespace"] = "NS"
        docs.append(doc)
    (d / "samples.yaml").write_text(yaml.safe_dump_all(docs))
    out = karta(
        "mutate", "-f", str(d / "samples.yaml"), "-o", "json", f"--policy={d / 'policy.yaml'}"
    )
    items = json.loads(out)["items"]  # several documents: a List, in order
    assert len(items) == len(docs)
    return {str(p.relative_to(SAMPLES)): m for p, m in zip(_samples(), items, strict=True)}


SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


def _comparable(obj: dict[str, Any], sample: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    for k in (*SERVER_SET, "namespace"):
        meta.pop(k, None)
    if "generateName" in meta:  # each create generates its own
        meta.pop("name", None)
    if out.get("kind") == "Job" and not sample["metadata"].get("labels"):
        # A Job without labels of its own is defaulted to its template's label map, the same
        # Go map, into which the Job strategy then puts its selector labels. A mutating
        # webhook's answer is decoded and defaulted anew: the Job takes the template's labels
        # as they were before the webhook (when the template had some) or after it (when it
        # had none). Those are the API server's copies, compared in the template.
        meta.pop("labels", None)
    return out


def _body(path: Path, namespace: str) -> dict[str, Any]:
    doc = _doc(path)
    doc["metadata"]["namespace"] = namespace
    doc.pop("status", None)
    for k in SERVER_SET:
        doc["metadata"].pop(k, None)
    return doc


def _in(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    out = json.loads(json.dumps(doc).replace('"NS"', json.dumps(namespace)))
    out.pop("status", None)
    for k in SERVER_SET:
        out["metadata"].pop(k, None)
    return dict(out)


SAMPLE_IDS = [str(p.relative_to(SAMPLES)) for p in _samples()]


@pytest.mark.parametrize("sample", SAMPLE_IDS)
def test_the_stored_object_carries_what_offline_mutate_predicts(
    plane: kapi.ControlPlane,
    mutating: Webhook,
    discovery: Discovery,
    predicted: dict[str, dict[str, Any]],
    ns: str,
    sample: str,
) -> None:
    path = SAMPLES / sample
    body = _body(path, ns)
    collection = discovery.collection(body, ns)
    if collection is None:
        pytest.skip(f"{_gvk(body)} is not served: no CRD for it (see test_coverage)")
    # What the API server stores for the offline prediction without the webhook: the
    # predicted object created (dry-run: defaulted, validated, not stored) in the namespace
    # the webhook leaves alone. The API server defaults what a webhook returns again, so a
    # Job without labels of its own takes its template's labels, the injected ones too.
    plain = _in(predicted[sample], EXCLUDED)
    status, want = plane.request(
        "POST", f"{discovery.collection(body, EXCLUDED)}?dryRun=All", plain
    )
    assert status == 201, want
    status, created = plane.request("POST", collection, body)
    assert status == 201, created
    name = created["metadata"]["name"]  # generated for a generateName
    status, stored = plane.request("GET", f"{collection}/{name}")
    assert status == 200, stored
    # What differs between two creates of one object: its namespace and its uid (the Job
    # strategy copies the uid into its selector and template labels).
    text = json.dumps(want).replace(json.dumps(EXCLUDED), json.dumps(ns))
    want = json.loads(text.replace(want["metadata"]["uid"], stored["metadata"]["uid"]))
    assert _comparable(stored, body) == _comparable(want, body)


def test_the_predictions_change_most_samples(predicted: dict[str, dict[str, Any]]) -> None:
    """The comparison above is not of unchanged objects: the policy stamps nearly every
    sample (a RayJob on an existing cluster and a TrainJob on a runtime alone have no
    template of their own)."""
    unchanged = [s for s, m in predicted.items() if _in(m, "NS") == _in(_doc(SAMPLES / s), "NS")]
    assert len(unchanged) <= 6, unchanged


def test_coverage(discovery: Discovery, workload_crds: dict[str, str]) -> None:
    """Which catalog kinds the test above created for real; the rest have no CRD here. The
    built-in kinds and the kinds whose project's Go module gives its CRD must all be served."""
    served, missing = set(), set()
    for path in _samples():
        group, version, kind = _gvk(_doc(path))
        (served if discovery.resource(group, version, kind) else missing).add(
            f"{group or 'core'}/{version}/{kind}"
        )
    assert {k for k in served if k.split("/")[0] in BUILTIN_GROUPS | {"core"}} >= {
        "core/v1/Pod", "apps/v1/Deployment", "apps/v1/StatefulSet", "apps/v1/DaemonSet",
        "apps/v1/ReplicaSet", "batch/v1/Job", "batch/v1/CronJob",
    }  # fmt: skip
    assert "jobset.x-k8s.io/v1alpha2/JobSet" in served
    assert missing == NO_CRD, "hack/workload-crds.txt gives a CRD for fewer or more kinds"
    print(f"served {len(served)}: {sorted(served)}\nno CRD {len(missing)}: {sorted(missing)}")


# --------------------------------------------------------------------------- verbs


def _jobset(name: str, namespace: str) -> dict[str, Any]:
    doc = _doc(SAMPLES / "jobset.x-k8s.io-jobset-v1alpha2" / "leader-workers.yaml")
    doc["metadata"] = {"name": name, "namespace": namespace}
    doc.pop("status", None)
    return doc


def _templates(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    return [rj["template"]["spec"]["template"] for rj in jobset["spec"]["replicatedJobs"]]


def _stamped(template: dict[str, Any]) -> bool:
    return bool(
        template["spec"].get("schedulerName") == "kai-scheduler"
        and template.get("metadata", {}).get("labels", {}).get("kai.scheduler/queue") == "research"
    )


QUEUE_LABEL_OF_FIRST_TEMPLATE = (
    "/spec/replicatedJobs/0/template/spec/template/metadata/labels/kai.scheduler~1queue"
)


def test_update_is_mutated_when_the_policy_asks(
    plane: kapi.ControlPlane, mutating: Webhook, ns: str
) -> None:
    plane.apply([_jobset("upd", ns)])
    js = plane.get_json("jobset", "upd", "-n", ns)
    assert all(_stamped(t) for t in _templates(js))
    # A user removes the queue label from the first template: the UPDATE is mutated back.
    plane.kubectl(
        "patch", "jobset", "upd", "-n", ns, "--type=json",
        "-p", json.dumps([{
            "op": "remove",
            "path": QUEUE_LABEL_OF_FIRST_TEMPLATE,
        }]),
    )  # fmt: skip
    js = plane.get_json("jobset", "upd", "-n", ns)
    assert all(_stamped(t) for t in _templates(js))


def test_server_side_dry_run_gets_the_same_mutation_and_stores_nothing(
    plane: kapi.ControlPlane, mutating: Webhook, ns: str
) -> None:
    out = plane.kubectl(
        "apply", "--dry-run=server", "-o", "json", "-f", "-",
        input=yaml.safe_dump(_jobset("dry", ns)),
    )  # fmt: skip
    js = json.loads(out.stdout)
    assert all(_stamped(t) for t in _templates(js))
    assert plane.kubectl("get", "jobset", "dry", "-n", ns, check=False).returncode != 0


def _audit_events(plane: kapi.ControlPlane, name: str, namespace: str) -> list[dict[str, Any]]:
    events = []
    for line in (plane.dir / "audit.log").read_text().splitlines():
        e = json.loads(line)
        ref = e.get("objectRef") or {}
        if ref.get("name") == name and ref.get("namespace") == namespace:
            events.append(e)
    return events


def test_reinvocation_is_a_no_op(plane: kapi.ControlPlane, mutating: Webhook, ns: str) -> None:
    """A MutatingAdmissionPolicy that annotates the JobSet with how many of its templates are
    stamped changes it after our webhook did: the API server calls our webhook again
    (``reinvocationPolicy: IfNeeded``), and that second call changes nothing, as the API
    server's own audit annotations record."""
    name = f"mapreinvoke-{uuid.uuid4().hex[:6]}"
    plane.apply(_annotating_policy(name, ns))
    try:
        wait_until(
            "the MutatingAdmissionPolicy annotates a dry-run JobSet",
            lambda: "reinvoke.example.com/stamped"
            in json.loads(
                plane.kubectl(
                    "apply", "--dry-run=server", "-o", "json", "-f", "-",
                    input=yaml.safe_dump(_jobset("probe", ns)),
                ).stdout
            )["metadata"].get("annotations", {}),
        )  # fmt: skip
        plane.apply([_jobset("reinvoked", ns)])
        js = plane.get_json("jobset", "reinvoked", "-n", ns)
        assert all(_stamped(t) for t in _templates(js))
        # The policy saw our stamps: it ran again after our webhook.
        assert js["metadata"]["annotations"]["reinvoke.example.com/stamped"] == "2"
        deadline = time.monotonic() + 10
        rounds: dict[str, Any] = {}
        while time.monotonic() < deadline:
            for e in _audit_events(plane, "reinvoked", ns):
                if e.get("verb") == "create" and e.get("stage") == "ResponseComplete":
                    rounds = {
                        k: json.loads(v)
                        for k, v in (e.get("annotations") or {}).items()
                        if k.startswith("mutation.webhook.admission.k8s.io/")
                    }
            if rounds:
                break
            time.sleep(0.2)
        ours = {k: v for k, v in rounds.items() if v.get("webhook", "").startswith("workloads.")}
        assert any("round_0" in k and v["mutated"] for k, v in ours.items()), rounds
        assert any("round_1" in k and not v["mutated"] for k, v in ours.items()), rounds
    finally:
        plane.kubectl(
            "delete", "mutatingadmissionpolicybinding,mutatingadmissionpolicy", name,
            "--ignore-not-found",
        )  # fmt: skip


def _annotating_policy(name: str, namespace: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["jobset.x-k8s.io"],
                            "apiVersions": ["*"],
                            "operations": ["CREATE"],
                            "resources": ["jobsets"],
                        }
                    ]
                },
                "reinvocationPolicy": "IfNeeded",
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": (
                                "Object{metadata: Object.metadata{annotations: "
                                '{"reinvoke.example.com/stamped": string('
                                "object.spec.replicatedJobs.filter(r, "
                                "has(r.template.spec.template.spec.schedulerName) && "
                                'r.template.spec.template.spec.schedulerName == "kai-scheduler")'
                                ".size())}}}"
                            )
                        },
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    ]


def test_an_object_being_deleted_is_left_alone(
    plane: kapi.ControlPlane, mutating: Webhook, ns: str
) -> None:
    """The UPDATE that removes the last finalizer of a JobSet being deleted (and, with it, a
    label the policy would put back on a live JobSet) is not mutated: the API server's audit
    annotations of that request say our webhook ran and changed nothing; the JobSet goes."""
    js = _jobset("leaving", ns)
    js["metadata"]["finalizers"] = ["example.com/hold"]
    plane.apply([js])
    plane.kubectl("delete", "jobset", "leaving", "-n", ns, "--wait=false")
    stored = plane.get_json("jobset", "leaving", "-n", ns)
    assert stored["metadata"].get("deletionTimestamp")
    plane.kubectl(
        "patch", "jobset", "leaving", "-n", ns, "--type=json",
        "-p", json.dumps([
            {"op": "remove", "path": "/metadata/finalizers"},
            # What an UPDATE of a live JobSet gets back (test_update_is_mutated_...):
            {"op": "remove", "path": QUEUE_LABEL_OF_FIRST_TEMPLATE},
        ]),
    )  # fmt: skip
    assert plane.kubectl("get", "jobset", "leaving", "-n", ns, check=False).returncode != 0
    deadline = time.monotonic() + 10
    ours: list[dict[str, Any]] = []
    while not ours and time.monotonic() < deadline:
        for e in _audit_events(plane, "leaving", ns):
            if e.get("verb") == "patch" and e.get("stage") == "ResponseComplete":
                ours = [
                    json.loads(v)
                    for k, v in (e.get("annotations") or {}).items()
                    if k.startswith("mutation.webhook.admission.k8s.io/")
                ]
        time.sleep(0.2)
    assert ours and not any(a["mutated"] for a in ours), ours
