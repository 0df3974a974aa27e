#!/usr/bin/env bash
# The real Kubernetes control plane for tests/test_kube_live.py and tests/test_kueue_live.py: etcd,
# Kubernetes and Kueue built from the Go modules pinned in k8s/ (cached by version: a warm machine
# returns at once; Kueue's first build is about 6 CPU-minutes).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec k8s/build.sh
