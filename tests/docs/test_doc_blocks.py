"""Every command block of README.md and docs/install.md is run by a test or marked as needing
what a test cannot have (issue 38 item 2; the markers in ``tests/docblocks.py``); and the blocks
that need no server or cluster, run here as written: README's 30-second CLI tour and the GitOps
operations of install.md section 2e."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import docblocks
import pytest
import yaml
from docblocks import (
    DOCS,
    ROOT,
    block,
    cli_env,
    command_blocks,
    console_commands,
    matches,
    parse,
)

README_MAX_LINES = 250


def _tests_running(ident: str) -> list[Path]:
    """The test files that call ``block(DOC, ident)``."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == "docblocks.py":
            continue
        if any(m.group(2) == ident for m in docblocks.USE.finditer(path.read_text())):
            found.append(path)
    return found


def test_every_command_block_is_run_or_marked() -> None:
    problems = []
    seen: dict[str, str] = {}
    for doc in DOCS:
        for b in command_blocks(doc):
            if b.run_by is None and b.needs is None:
                first = b.text.strip().splitlines()[0] if b.text.strip() else ""
                problems.append(
                    f"{b.where}: a ```{b.lang} block ({first!r}) is neither run by a test "
                    "(<!-- run-by: ID --> and block(DOC, ID) in a test) nor marked "
                    "(<!-- needs: WHY -->)"
                )
            if b.run_by is not None:
                if b.run_by in seen:
                    problems.append(f"{b.where}: run-by id {b.run_by} also at {seen[b.run_by]}")
                seen[b.run_by] = b.where
                if not _tests_running(b.run_by):
                    problems.append(f"{b.where}: run-by: {b.run_by}, but no test calls block(..)")
            if b.needs is not None and len(b.needs) < 10:
                problems.append(f"{b.where}: needs: say what it needs ({b.needs!r})")
    assert not problems, "\n".join(problems)


def test_every_marker_stands_before_a_block() -> None:
    stray = [
        f"{m.doc}:{m.line}: <!-- {m.kind}: {m.value} --> is not just before a fenced block"
        for doc in DOCS
        for m in parse(doc)[1]
        if not m.followed_by_block
    ]
    assert not stray, "\n".join(stray)


def test_every_block_a_test_runs_is_in_the_docs() -> None:
    ids = {b.run_by for doc in DOCS for b in command_blocks(doc) if b.run_by}
    used = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name != "docblocks.py":
            used |= {(m.group(1), m.group(2)) for m in docblocks.USE.finditer(path.read_text())}
    missing = sorted(f"{doc}: {i}" for doc, i in used if i not in ids or doc not in DOCS)
    assert not missing, f"tests run blocks the docs no longer mark: {missing}"


def test_the_checker_finds_an_unmarked_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "intro\n\n<!-- needs: a real cluster (docker) -->\n```sh\ndocker build .\n```\n\n"
        "```bash\nkubectl get pods\n```\n\n  <!-- run-by: x -->\n\n  ```sh\n  echo hi\n  ```\n"
        "<!-- needs: nothing follows -->\n\ntext\n"
    )
    monkeypatch.setattr(docblocks, "ROOT", tmp_path)
    blocks, markers = parse("doc.md")
    assert [(b.lang, b.needs, b.run_by) for b in blocks] == [
        ("sh", "a real cluster (docker)", None),
        ("bash", None, None),
        ("sh", None, "x"),
    ]
    assert blocks[2].text == "echo hi\n"
    assert [(m.line, m.followed_by_block) for m in markers] == [(3, True), (12, True), (17, False)]


def test_readme_is_read_in_five_minutes() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines, at most {README_MAX_LINES}"


def test_readme_cli_tour(tmp_path: Path) -> None:
    """The 30-second tour, each ``$`` command run from the repository root; what it prints is
    what README shows (``...`` standing for the lines left out)."""
    env = cli_env(tmp_path)
    commands = console_commands(block("README.md", "readme-cli-tour"))
    assert len(commands) >= 2
    for cmd, expected in commands:
        out = subprocess.run(
            ["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, f"{cmd}: {out.stderr}"
        assert matches(expected, out.stdout.rstrip("\n").splitlines()), (
            f"{cmd} printed:\n{out.stdout}\nREADME shows:\n" + "\n".join(expected)
        )


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (test extras) not on PATH")
def test_install_gitops_operations(tmp_path: Path) -> None:
    """install.md 2e item 4, as written: the overlay's kustomization.yaml from the doc, a policy
    with operations [CREATE, UPDATE], the configurations it generates, rendered by kubectl's
    kustomize: every rule of every webhook has UPDATE, and the Service and caBundle stay."""
    kustomization = [
        b.text
        for b in parse("docs/install.md")[0]
        if b.lang == "yaml" and b.text.startswith("# overlay/kustomization.yaml")
    ]
    assert len(kustomization) == 1
    (tmp_path / "overlay").mkdir()
    (tmp_path / "overlay" / "kustomization.yaml").write_text(kustomization[0])
    yaml.safe_load((tmp_path / "overlay" / "kustomization.yaml").read_text())
    (tmp_path / "manifests").symlink_to(ROOT / "manifests")
    (tmp_path / "policy.yaml").write_text("operations: [CREATE, UPDATE]\nrules: []\n")
    env = cli_env(tmp_path)
    subprocess.run(
        ["karta-webhook", "certs", "--out", "certs", "--service", "karta-webhook",
         "--namespace", "karta-system"],
        cwd=tmp_path, env=env, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block("docs/install.md", "install-gitops-operations")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all((tmp_path / "rendered.yaml").read_text()) if d]
    hooks = [
        (d["kind"], w)
        for d in docs
        if d["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for w in d["webhooks"]
    ]
    assert {w["name"] for _, w in hooks} >= {"workloads.karta-webhook.run.ai"}
    ca = (tmp_path / "certs" / "ca.crt").read_bytes()
    for kind, w in hooks:
        assert w["clientConfig"]["service"]["namespace"] == "karta-system", (kind, w["name"])
        assert base64.b64decode(w["clientConfig"]["caBundle"]) == ca
        for rule in w["rules"]:
            assert rule["operations"] == ["CREATE", "UPDATE"], (kind, w["name"], rule)
    workloads = next(w for _, w in hooks if w["name"] == "workloads.karta-webhook.run.ai")
    base = yaml.safe_load_all((ROOT / "manifests" / "base" / "webhooks.yaml").read_text())
    base_rules = next(d for d in base if d and d["kind"] == "MutatingWebhookConfiguration")
    want = {
        (tuple(r["apiGroups"]), tuple(r["apiVersions"]), tuple(r["resources"]))
        for r in base_rules["webhooks"][0]["rules"]
    }
    got = {
        (tuple(r["apiGroups"]), tuple(r["apiVersions"]), tuple(r["resources"]))
        for r in workloads["rules"]
    }
    assert got == want  # the same kinds as the shipped manifests, with UPDATE


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl")
def test_install_client_ca(tmp_path: Path) -> None:
    """install.md section 6, step 1 as written: a callers' CA and a client certificate for the
    API server that it signed, for client authentication."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block("docs/install.md", "install-client-ca")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    ca = x509.load_pem_x509_certificate((tmp_path / "callers-ca.crt").read_bytes())
    leaf = x509.load_pem_x509_certificate((tmp_path / "apiserver.crt").read_bytes())
    leaf.verify_directly_issued_by(ca)
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert leaf.subject.rfc4514_string() == "CN=kube-apiserver"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_links_between_the_docs_resolve() -> None:
    """Every relative link of README.md and docs/*.md names a file that exists and, with
    ``#anchor`` into a Markdown file, a heading of it (the text moved: links must follow)."""
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}: no such file")
                continue
            if anchor and dest.suffix == ".md":
                heads = {_slug(h) for h in re.findall(r"^#+ (.*)$", dest.read_text(), re.M)}
                if anchor not in heads:
                    broken.append(f"{doc.relative_to(ROOT)}: {target}: no such heading")
    assert not broken, "\n".join(broken)
