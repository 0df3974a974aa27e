#!/usr/bin/env bash
# Re-record the real-Slurm topology replays chapter 5 shows where no local Slurm can run (issue 29).
# Needs root and the course's Slurm (make setup-slurm); writes
# src/courselib/data/recorded/slurm-topology-<name>.json. Each replay restarts the local Slurm with
# the workload's shape: its nodes, features and topology.conf (topology/tree or topology/block).
# Usage (from the repository root): bash examples/topology/record.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
CL=${COURSELIB:-.venv/bin/courselib}
OUT=src/courselib/data/recorded
trap '$CL slurm down >/dev/null 2>&1 || true' EXIT

$CL slurm down >/dev/null
$CL slurm up --nodes 16 --gpus-per-node 4 --features "" --topology rack:8,block:4 >/dev/null
for w in best-fit-block segment-block block-sizes fragmentation apart blocked-head larger-than-domain \
         preferred-vs-required mixed switches switches-reservation \
         switches-greedy; do
    $CL slurm replay "examples/topology/$w.yaml" --compare --record "$OUT/slurm-topology-$w.json" || true
done
$CL slurm down >/dev/null
ls -1 "$OUT"/slurm-topology-*.json
