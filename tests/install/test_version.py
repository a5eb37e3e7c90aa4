"""One version for the package, the image and the chart: pyproject.toml, ``webhook.__version__``,
the chart's ``version`` and ``appVersion``, the image the kustomize base runs (and its
``app.kubernetes.io/version`` label), CHANGELOG.md's newest entry, and every
``karta-webhook:TAG`` the README, the docs, the Dockerfile and hack/ scripts name."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

import webhook

ROOT = Path(__file__).resolve().parent.parent.parent
IMAGE_TAG = re.compile(r"karta-webhook/karta-webhook:([0-9][0-9A-Za-z.+-]*)")


def version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_package_chart_and_manifests_name_one_version() -> None:
    v = version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", v), v
    chart = yaml.safe_load((ROOT / "charts" / "karta-webhook" / "Chart.yaml").read_text())
    deployment = yaml.safe_load((ROOT / "manifests" / "base" / "deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    found = {
        "webhook.__version__": webhook.__version__,
        "Chart.yaml version": str(chart["version"]),
        "Chart.yaml appVersion": str(chart["appVersion"]),
        "manifests image": container["image"].rsplit(":", 1)[1],
        "manifests label": deployment["metadata"]["labels"]["app.kubernetes.io/version"],
    }
    assert found == dict.fromkeys(found, v)


def test_changelog_starts_with_this_version() -> None:
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings and headings[0] == version(), headings
    assert len(headings) == len(set(headings)), headings


def test_every_image_tag_in_docs_and_scripts_is_this_version() -> None:
    files = [ROOT / "README.md", ROOT / "Dockerfile", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "hack").glob("*.sh"))
    tags = {
        f"{path.relative_to(ROOT)}: {tag}"
        for path in files
        for tag in IMAGE_TAG.findall(path.read_text())
        if tag != version()
    }
    assert not tags, f"image tags other than {version()}: {sorted(tags)}"
