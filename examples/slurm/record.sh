#!/usr/bin/env bash
# Re-record the real-Slurm replays the Slurm chapter shows where no local Slurm can run.
# Needs root and the course's Slurm (make setup-slurm); writes src/courselib/data/recorded/slurm-<name>.json.
# Usage (from the repository root): bash examples/slurm/record.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
CL=${COURSELIB:-.venv/bin/courselib}
OUT=src/courselib/data/recorded
trap '$CL slurm down >/dev/null 2>&1 || true' EXIT

$CL slurm down >/dev/null
$CL slurm up --nodes 4 --gpus-per-node 8 --features nvlink:2 >/dev/null
for w in whole-job resources-priority too-big constraint exclusive backfill; do
    $CL slurm replay "examples/slurm/$w.yaml" --compare --record "$OUT/slurm-$w.json" >/dev/null || true
done
$CL slurm down >/dev/null
$CL slurm up --nodes 4 --gpus-per-node 8 --features nvlink >/dev/null
$CL slurm replay examples/slurm/seed-512.yaml --compare --record "$OUT/slurm-seed-512.json" >/dev/null || true
$CL slurm down >/dev/null
# the busy cluster (issue 35): about two minutes; its start order depends on sub-second timing, so
# --compare may report below 100 % (tests/test_slurm_plan.py checks it decision by decision)
$CL slurm up --nodes 8 --gpus-per-node 8 --features '' >/dev/null
$CL slurm replay examples/slurm/busy.yaml --compare --record "$OUT/slurm-busy.json" >/dev/null || true
$CL slurm down >/dev/null
ls -1 "$OUT"/slurm-*.json
