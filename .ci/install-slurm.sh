#!/usr/bin/env bash
# Install a local Slurm (slurmctld, slurmd, client tools) and munge from Debian, for the
# course's `courselib slurm` commands and tests/test_slurm*.py. Idempotent and quiet:
# does nothing when everything is already installed, and runs `apt-get update` only when
# the package lists are missing or apt cannot find a package.
set -euo pipefail

PACKAGES=(slurm-wlm slurmctld slurmd slurm-client munge)
COMMANDS=(slurmctld slurmd sbatch squeue scontrol munged)

have_all() {
    local c
    for c in "${COMMANDS[@]}"; do
        command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || return 1
    done
}

if have_all; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-slurm: need root to apt-get install ${PACKAGES[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
# Quiet on success; the full apt output on failure.
apt_install() {
    apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >"$LOG" 2>&1
}

# Lists present and fresh enough to know the packages? Install straight away; else update first.
if ! apt-cache show slurmctld >/dev/null 2>&1 || ! apt_install; then
    apt-get update -qq >"$LOG" 2>&1 || { cat "$LOG" >&2; exit 1; }
    apt_install || { cat "$LOG" >&2; exit 1; }
fi

# Debian's postinst may start system services; the course never uses them (it runs its own
# daemons on private ports), so stop any that came up, quietly.
for svc in slurmctld slurmd munge; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
        systemctl stop "$svc" >/dev/null 2>&1 || true
    fi
done

have_all || { echo "install-slurm: Slurm commands still missing after install" >&2; exit 1; }
