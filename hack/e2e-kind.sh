#!/usr/bin/env bash
# End-to-end test of karta-webhook in a throwaway kind cluster.
#
# Needs: docker (with a running engine), kind, kubectl, curl, python3 with this repo's
# dependencies installed (`pip install -e .`; used for `karta-webhook certs`).
# Not run in CI. Usage:
#   hack/e2e-kind.sh                      # create cluster, test, delete cluster
#   KEEP_CLUSTER=1 hack/e2e-kind.sh       # leave the cluster running for inspection
#   KIND_NODE_IMAGE=kindest/node:v1.31.6 hack/e2e-kind.sh
# Environment:
#   CLUSTER          kind cluster name (default karta-e2e)
#   IMAGE            image to build and load (default: the tag in manifests/base/deployment.yaml)
#   JOBSET_VERSION   JobSet release whose CRD is installed (default v0.8.2)
#   PATCH_CABUNDLE=1 write caBundle into the webhook configurations from this script instead of
#                    waiting for the server's leader to do it
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER="${CLUSTER:-karta-e2e}"
IMAGE="${IMAGE:-ghcr.io/karta-webhook/karta-webhook:0.2.0}"
JOBSET_VERSION="${JOBSET_VERSION:-v0.8.2}"
NS=karta-system
CTX="kind-${CLUSTER}"
WORK="$(mktemp -d)"
PASSED=0

log() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
ok() { printf '    \033[32mok\033[0m  %s\n' "$*"; PASSED=$((PASSED + 1)); }
fail() { printf '    \033[31mFAIL\033[0m %s\n' "$*" >&2; exit 1; }
k() { kubectl --context "$CTX" "$@"; }

cleanup() {
  local rc=$?
  if [[ $rc -ne 0 ]] && kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    echo "--- diagnostics (exit $rc) ---" >&2
    k -n "$NS" get pods -o wide >&2 || true
    k -n "$NS" logs -l app.kubernetes.io/name=karta-webhook --tail=50 --prefix >&2 || true
  fi
  rm -rf "$WORK"
  if [[ "${KEEP_CLUSTER:-0}" == 1 ]]; then
    echo "keeping cluster ${CLUSTER} (kind delete cluster --name ${CLUSTER})"
  else
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
  exit $rc
}
trap cleanup EXIT

for tool in docker kind kubectl curl python3; do
  command -v "$tool" >/dev/null || fail "$tool is not installed"
done
docker info >/dev/null 2>&1 || fail "docker engine is not reachable"
if command -v karta-webhook >/dev/null; then
  KW=(karta-webhook)
else
  KW=(python3 -m webhook)
fi

log "creating kind cluster ${CLUSTER}"
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  fail "cluster ${CLUSTER} exists already; delete it or set CLUSTER"
fi
kind create cluster --name "$CLUSTER" --wait 120s ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}

log "building and loading ${IMAGE}"
docker build -t "$IMAGE" "$ROOT"
kind load docker-image "$IMAGE" --name "$CLUSTER"

log "installing the JobSet CRD (${JOBSET_VERSION})"
# Only the CRD from the release manifests: the mutation is checked on the JobSet object itself,
# so JobSet's controller (and its own webhooks) are not needed.
curl -fsSL "https://github.com/kubernetes-sigs/jobset/releases/download/${JOBSET_VERSION}/manifests.yaml" \
  -o "$WORK/jobset.yaml"
python3 - "$WORK/jobset.yaml" >"$WORK/jobset-crd.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
# The release CRD points to JobSet's conversion webhook only when conversion is configured.
for crd in crds:
    crd["spec"].pop("conversion", None)
print(yaml.safe_dump_all(crds))
PY
k apply --server-side -f "$WORK/jobset-crd.yaml"
k wait --for=condition=Established crd/jobsets.jobset.x-k8s.io --timeout=60s
ok "JobSet CRD established"

log "creating certificates and the Secret karta-webhook-tls"
"${KW[@]}" certs --out "$WORK/certs" --service karta-webhook --namespace "$NS"
k create namespace "$NS" --dry-run=client -o yaml | k apply -f -
k -n "$NS" create secret generic karta-webhook-tls --type=kubernetes.io/tls \
  --from-file=tls.crt="$WORK/certs/tls.crt" \
  --from-file=tls.key="$WORK/certs/tls.key" \
  --from-file=ca.crt="$WORK/certs/ca.crt"
ok "Secret created"

log "kubectl apply -k manifests/"
k apply -k "$ROOT/manifests/"
k wait --for=condition=Established crd/kartas.run.ai --timeout=60s
k -n "$NS" rollout status deploy/karta-webhook --timeout=180s
ok "karta-webhook rolled out"

CA_B64="$(base64 <"$WORK/certs/ca.crt" | tr -d '\n')"
if [[ "${PATCH_CABUNDLE:-0}" == 1 ]]; then
  log "patching caBundle from this script"
  for i in 0 1; do
    k patch mutatingwebhookconfiguration karta-webhook --type=json \
      -p "[{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"$CA_B64\"}]"
  done
  k patch validatingwebhookconfiguration karta-webhook --type=json \
    -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$CA_B64\"}]"
else
  log "waiting for the server to fill in caBundle"
  for _ in $(seq 60); do
    got="$(k get mutatingwebhookconfiguration karta-webhook \
      -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2>/dev/null || true)"
    [[ "$got" == "$CA_B64" ]] && break
    sleep 2
  done
  [[ "${got:-}" == "$CA_B64" ]] ||
    fail "caBundle of MutatingWebhookConfiguration karta-webhook was not set to ca.crt within 120s (retry with PATCH_CABUNDLE=1 to test the rest)"
fi
ok "caBundle is the CA from karta-webhook certs"

log "creating a JobSet in namespace team-a (matches the policy rule 'kai')"
k create namespace team-a --dry-run=client -o yaml | k apply -f -
cat >"$WORK/jobset-demo.yaml" <<'YAML'
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: demo
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 1
        completions: 1
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: main
              image: busybox:1.36
              command: ["true"]
YAML
# failurePolicy is Ignore: a request that reaches no ready endpoint yet is let through
# unmutated. Recreate a few times to ride out that start-up window, then insist.
tpl='{.spec.replicatedJobs[0].template.spec.template'
for attempt in 1 2 3 4 5; do
  k -n team-a apply -f "$WORK/jobset-demo.yaml" >/dev/null
  sched="$(k -n team-a get jobset demo -o jsonpath="${tpl}.spec.schedulerName}")"
  [[ "$sched" == kai-scheduler ]] && break
  echo "    attempt $attempt: schedulerName is '${sched}', recreating"
  k -n team-a delete jobset demo --wait=true >/dev/null
  sleep 3
done
[[ "$sched" == kai-scheduler ]] || fail "JobSet pod template schedulerName is '${sched}', want kai-scheduler"
ok "schedulerName: kai-scheduler"
queue="$(k -n team-a get jobset demo -o jsonpath="${tpl}.metadata.labels.kai\.scheduler/queue}")"
[[ "$queue" == research ]] || fail "label kai.scheduler/queue is '${queue}', want research"
ok "label kai.scheduler/queue=research"
owner="$(k -n team-a get jobset demo -o jsonpath="${tpl}.metadata.annotations.example\.com/owner}")"
[[ "$owner" == demo ]] || fail "annotation example.com/owner is '${owner}', want demo (\$(workload.name))"
ok "annotation example.com/owner=demo"

log "a JobSet in a namespace no rule matches is left alone"
k create namespace elsewhere --dry-run=client -o yaml | k apply -f -
k -n elsewhere apply -f "$WORK/jobset-demo.yaml" >/dev/null
sched="$(k -n elsewhere get jobset demo -o jsonpath="${tpl}.spec.schedulerName}")"
[[ "$sched" != kai-scheduler ]] || fail "JobSet in namespace elsewhere was mutated"
ok "not mutated outside the policy's namespaces"

log "a bad Karta is denied by the validating webhook"
cat >"$WORK/bad-karta.yaml" <<'YAML'
apiVersion: run.ai/v1alpha1
kind: Karta
metadata:
  name: e2e-bad
spec:
  structureDefinition:
    rootComponent:
      name: root
      # no kind, no statusDefinition, and a forbidden jq function
      specDefinition:
        podTemplateSpecPath: del(.spec.template)
YAML
if out="$(k apply -f "$WORK/bad-karta.yaml" 2>&1)"; then
  k delete -f "$WORK/bad-karta.yaml" --ignore-not-found >/dev/null || true
  fail "bad Karta was accepted: $out"
fi
grep -q 'admission webhook "kartas.karta-webhook.run.ai" denied the request' <<<"$out" ||
  fail "bad Karta rejected, but not by karta-webhook: $out"
echo "$out" | sed 's/^/    | /'
ok "bad Karta denied"

log "all ${PASSED} checks passed"
