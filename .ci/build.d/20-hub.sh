#!/usr/bin/env bash
# The class server's proxy for tests/test_hub_live.py and `courselib classroom hub up`: npm's
# configurable-http-proxy, pinned, installed once into the build steps' cache folder (quick when present):
#   ${COURSELIB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/allornothing}/configurable-http-proxy-<version>
# JupyterHub, nbgitpuller and KubeSpawner are the `hub` extra of pyproject.toml (make setup installs it).
set -euo pipefail
VERSION=5.3.0   # courselib.live.hub.PROXY_VERSION
cache=${COURSELIB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/allornothing}   # courselib.live.daemons.cache_dir
HOME_DIR="$cache/configurable-http-proxy-$VERSION"
BIN="$HOME_DIR/node_modules/.bin/configurable-http-proxy"
if [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null)" = "$VERSION" ]; then
  echo "configurable-http-proxy $VERSION: already installed in $HOME_DIR"; exit 0
fi
if ! command -v npm >/dev/null; then
  echo "configurable-http-proxy: npm is missing (apt-get install nodejs npm); the hub test will skip"; exit 0
fi
mkdir -p "$HOME_DIR"
npm install --silent --no-audit --no-fund --prefix "$HOME_DIR" "configurable-http-proxy@$VERSION"
"$BIN" --version
