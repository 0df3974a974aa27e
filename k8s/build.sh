#!/usr/bin/env bash
# Build the real components the course runs (courselib kube up) from the Go modules pinned in
# k8s/*/go.mod, once per version, into a cache folder:
#   ${COURSELIB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/allornothing}/<component>-<version>/bin/
# A component whose folder holds a stamp for the same go.sum is skipped, so a warm machine returns at
# once. `make setup-k8s` and .ci/run call this; courselib finds the binaries in the same place.
#   k8s/build.sh            every component (etcd, kube, kueue, jobset)
#   k8s/build.sh kube etcd  only those
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${COURSELIB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/allornothing}
export GOFLAGS="-mod=readonly -buildvcs=false"  # the pins in go.mod/go.sum, exactly
export CGO_ENABLED=0  # static binaries; nothing here needs cgo

if ! command -v go >/dev/null 2>&1; then
  echo "k8s/build.sh: Go is not installed (the course pins Go modules; Go 1.26 or newer builds them)" >&2
  exit 1
fi

# component  module-folder  version-module  packages...
components=(
  "etcd|etcd|go.etcd.io/etcd/server/v3|go.etcd.io/etcd/server/v3"
  "kube|kube|k8s.io/kubernetes|k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager"
)
[ -f "$here/kueue/go.mod" ] && components+=("kueue|kueue|sigs.k8s.io/kueue|sigs.k8s.io/kueue/cmd/kueue")
# JobSet's manager is the module's root package (main.go); go names the binary "jobset".
[ -f "$here/jobset/go.mod" ] && components+=("jobset|jobset|sigs.k8s.io/jobset|sigs.k8s.io/jobset")

want=("$@")
for entry in "${components[@]}"; do
  IFS='|' read -r name dir vmod pkgs <<<"$entry"
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
  moddir="$here/$dir"
  version=$(cd "$moddir" && go list -m -f '{{.Version}}' "$vmod")
  out="$cache/$name-$version"
  stamp="$out/.built-$(sha256sum "$moddir/go.sum" | cut -c1-16)"
  if [ -f "$stamp" ]; then
    echo "k8s/build.sh: $name $version already built in $out/bin"
    continue
  fi
  ldflags="-s -w"
  if [ "$name" = kube ]; then
    # What `kubectl version` and the feature gates' emulation version read (component-base/version).
    minor=$(echo "$version" | cut -d. -f2)
    v=k8s.io/component-base/version
    ldflags+=" -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
    ldflags+=" -X $v.buildDate=1970-01-01T00:00:00Z"
  fi
  if [ "$name" = kueue ]; then
    # What the manager logs at start (sigs.k8s.io/kueue/pkg/version), as Kueue's Makefile sets it.
    ldflags+=" -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version"
  fi
  if [ "$name" = jobset ]; then
    # What the manager logs at start (sigs.k8s.io/jobset/pkg/version), as JobSet's Makefile sets it.
    ldflags+=" -X sigs.k8s.io/jobset/pkg/version.GitVersion=$version"
  fi
  echo "k8s/build.sh: building $name $version into $out/bin (first time: minutes on 2 cores)"
  start=$(date +%s)
  mkdir -p "$out/bin"
  # shellcheck disable=SC2086
  (cd "$moddir" && go build -trimpath -ldflags "$ldflags" -o "$out/bin/" $pkgs)
  # go names a /vN module's binary after the element before it: etcd's main is "server".
  if [ "$name" = etcd ] && [ -x "$out/bin/server" ]; then mv "$out/bin/server" "$out/bin/etcd"; fi
  if [ "$name" = kueue ] || [ "$name" = jobset ]; then
    # The controller's own CRDs and webhook manifests, as the module ships them (courselib kube up
    # --with kueue|jobset applies them): copied next to the binary, never into the repository.
    src=$(cd "$moddir" && go list -m -f '{{.Dir}}' "$vmod")/config/components
    rm -rf "$out/config"
    mkdir -p "$out/config"
    cp -r "$src/crd" "$src/webhook" "$src/internalcert" "$out/config/"
    chmod -R u+w "$out/config"
  fi
  rm -f "$out"/.built-*
  touch "$stamp"
  echo "k8s/build.sh: built $name $version in $(( $(date +%s) - start )) s ($(du -sh "$out/bin" | cut -f1))"
done
