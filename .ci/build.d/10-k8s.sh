#!/usr/bin/env bash
# The real Kubernetes control plane for tests/test_kube_live.py: etcd and Kubernetes built from the
# Go modules pinned in k8s/ (cached by version: a warm machine returns at once).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec k8s/build.sh
