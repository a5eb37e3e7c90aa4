"""The webhook running from the image (``hack/build-image.sh``), as the chart runs it
(``container.py``: read-only root, uid 65532, no capabilities, the TLS Secret and policy
mounted), registered with a real kube-apiserver by URL as docs/install.md section 10 registers
a local process (``karta-webhook manifests --url --ca-bundle``): workloads created through the
API server are stored with what the policy asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import container
import kapi
import pytest
from hooks import (
    catalog_sample,
    configurations,
    create_and_read,
    mutated_by_webhook,
    register,
    unregister,
    wait_until,
)

from webhook.server.certs_dev import ensure_dev_certs

POLICY = """\
rules:
- name: kai
  schedulerName: kai-scheduler
  labels:
    kai.scheduler/queue: research
  annotations:
    example.com/owner: "$(workload.name)"
"""


@dataclass
class ImageHook:
    """What ``hooks.configurations`` reads of a webhook: its URL, CA and policy file."""

    url: str
    ca: Path
    policy: Path


@pytest.fixture(scope="module")
def from_image(
    plane: kapi.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[container.Container]:
    image = container.image()
    d = tmp_path_factory.mktemp("image-hook")
    certs = ensure_dev_certs(d / "certs")  # names localhost and 127.0.0.1, as section 10's
    tls = {
        "tls.crt": certs.cert.read_bytes(),
        "tls.key": certs.key.read_bytes(),
        "ca.crt": certs.ca_cert.read_bytes(),
    }
    (d / "policy.yaml").write_text(POLICY)
    port, metrics = kapi.free_port(), kapi.free_port()
    c = container.run(
        image, d / "volumes", tls, POLICY, ["--no-kube"],
        network_host=True, port=port, metrics_port=metrics,
    )  # fmt: skip
    probe = "probe-image"
    try:
        plane.kubectl("create", "namespace", probe)
        hook = ImageHook(f"https://127.0.0.1:{port}", certs.ca_cert, d / "policy.yaml")
        register(plane, configurations(hook, policy=hook.policy, failure_policy="Fail"))  # type: ignore[arg-type]
        wait_until(
            "a Pod admitted through the image's webhook",
            lambda: mutated_by_webhook(plane, probe, "kai-scheduler"),
            seconds=60,
        )
        yield c
    except AssertionError as e:
        raise AssertionError(f"{e}\ncontainer log:\n{c.logs()}") from e
    finally:
        unregister(plane)
        c.remove()


def test_a_deployment_is_stored_as_the_policy_asks(
    plane: kapi.ControlPlane, ns: str, from_image: container.Container
) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    stored = create_and_read(plane, f"/apis/apps/v1/namespaces/{ns}/deployments", body)
    template = stored["spec"]["template"]
    assert template["spec"]["schedulerName"] == "kai-scheduler"
    assert template["metadata"]["labels"]["kai.scheduler/queue"] == "research"
    assert template["metadata"]["annotations"]["example.com/owner"] == "web"
    assert from_image.running()


def test_a_jobset_is_stored_with_every_pod_template_stamped(
    plane: kapi.ControlPlane,
    ns: str,
    from_image: container.Container,
    workload_crds: dict[str, str],
) -> None:
    assert "jobsets.jobset.x-k8s.io" in workload_crds
    body = catalog_sample("jobset.x-k8s.io-jobset-v1alpha2", None, ns, "trainer")
    stored = create_and_read(plane, f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets", body)
    templates = [rj["template"]["spec"]["template"] for rj in stored["spec"]["replicatedJobs"]]
    assert templates
    for t in templates:
        assert t["spec"]["schedulerName"] == "kai-scheduler"
        assert t["metadata"]["labels"]["kai.scheduler/queue"] == "research"
        assert t["metadata"]["annotations"]["example.com/owner"] == "trainer"
