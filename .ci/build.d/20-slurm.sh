#!/usr/bin/env bash
# The course's real Slurm: Debian's own slurm-wlm packages (the version pinned in
# src/courselib/data/versions.toml, [slurm]) in a root of their own, made by Debian's mmdebstrap.
# The release is newer than this Debian 12 machine can install directly (it is built against a newer
# glibc), so it lives in its own root, and `courselib slurm up` runs slurmctld and slurmd from there
# (courselib/live/slurm/root.py: chroot in a private mount namespace). Built once per version into
#   ${COURSELIB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/allornothing}/slurm-<version>/root
# (about 175 MB; about 20 s with a local mirror); a warm machine returns at once. `make setup-slurm`
# and .ci/run call this. Needs root (mmdebstrap's root mode, chroot) and Debian's mmdebstrap.
#   SLURM_MIRROR=URL  the Debian mirror (default: the one this machine's apt sources name)
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${COURSELIB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/allornothing}
toml=src/courselib/data/versions.toml

pin() {
  python3 -c 'import sys, tomllib
row = tomllib.load(open(sys.argv[1], "rb"))["slurm"]
print(row[sys.argv[2]])' "$toml" "$1"
}
version=$(pin version)            # 26.05.5: what slurmctld -V says
debian_version=$(pin debian_version)  # the Debian package version, exactly
suite=$(pin debian_suite)
packages=$(pin debian_packages)   # slurmctld slurmd slurm-client munge

out="$cache/slurm-$version"
stamp="$out/.built-$debian_version"
if [ -f "$stamp" ]; then
  echo "build.d/20-slurm: Slurm $version (Debian $suite $debian_version) already built in $out/root"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "build.d/20-slurm: need root to build the Slurm root (mmdebstrap's root mode); run as root" >&2
  exit 1
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null; }
fi

# The machine's Debian mirror: the first http(s) source of Debian's main archive (not -security).
mirror=${SLURM_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
    | grep -Eo 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -n1 | tr -d ' ' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi

include=""
for p in $packages; do
  case $p in
    slurm*) include+="${include:+,}$p=$debian_version" ;;   # exactly the pinned build
    *) include+="${include:+,}$p" ;;
  esac
done

echo "build.d/20-slurm: building Slurm $version (Debian $suite $debian_version: $packages) into $out/root"
start=$(date +%s)
mkdir -p "$cache"
work=$(mktemp -d "$cache/.slurm-build.XXXXXX")
# --one-file-system: never follow a mount a killed mmdebstrap might have left inside the root.
trap 'rm -rf --one-file-system "$work"' EXIT
log="$work/mmdebstrap.log"
# Debian's archive signs a suite's Release file with a Valid-Until date; a mirror frozen at a date
# (as this machine's is) serves it past that date, which apt refuses without the option.
if ! mmdebstrap --mode=root --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="$include" "$suite" "$work/root" "$mirror" >"$log" 2>&1; then
  tail -n 20 "$log" >&2
  echo "build.d/20-slurm: mmdebstrap failed (above). If $suite no longer has slurm-wlm $debian_version," \
       "build the current one and re-pin: set [slurm] version/debian_version in $toml, then re-record" \
       "the Slurm runs (courselib slurm replay --record)" >&2
  exit 1
fi
got=$(dpkg-query --admindir="$work/root/var/lib/dpkg" -W -f='${Version}' slurmctld)
if [ "$got" != "$debian_version" ]; then
  echo "build.d/20-slurm: the root has slurmctld $got, the course pins $debian_version" >&2
  exit 1
fi
if grep -q " $work" /proc/self/mountinfo; then
  echo "build.d/20-slurm: something is still mounted under $work; not moving it" >&2
  exit 1
fi
# The mount points courselib binds the host's /proc, /sys, /dev and /etc/hosts on (courselib/live/slurm/root.py).
mkdir -p "$work/root/proc" "$work/root/sys" "$work/root/dev" "$work/root/tmp"
[ -e "$work/root/etc/hosts" ] || : >"$work/root/etc/hosts"
dpkg-query --admindir="$work/root/var/lib/dpkg" -W -f='${Package} ${Version}\n' >"$work/packages.txt"
rm -rf --one-file-system "$out"
mkdir -p "$out"
mv "$work/root" "$out/root"
mv "$work/packages.txt" "$out/packages.txt"
touch "$stamp"
echo "build.d/20-slurm: built Slurm $version in $(( $(date +%s) - start )) s ($(du -sh --one-file-system "$out/root" | cut -f1))"
