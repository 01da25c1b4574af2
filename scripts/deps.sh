#!/usr/bin/env bash
# Installs exactly the Debian packages the build, tests and benchmarks need.
# Idempotent and fast when everything is already present (one dpkg-query call).
set -euo pipefail

PACKAGES=(
  build-essential pkg-config clang libclang-rt-14-dev
  libmicrohttpd-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
  libjansson-dev libuv1-dev libsqlite3-dev libcurl4-openssl-dev libyaml-dev libarchive-dev
  python3 python3-pytest python3-requests python3-grpcio python3-protobuf
  python3-kubernetes
  curl valgrind procps util-linux
  runc umoci libhttp-parser-dev
  iproute2 nftables libnftables-dev
  nodejs
)

# npm packages pinned by lock files (offline manifest validation: tests/kube).
npm_deps() {
  local d
  for d in tests/kube; do
    [ -f "$d/package-lock.json" ] || continue
    [ -d "$d/node_modules" ] && [ "$d/node_modules/.package-lock.json" -nt "$d/package-lock.json" ] && continue
    # Debian's npm package, unless nodejs already brings npm (nodesource builds do).
    if ! command -v npm >/dev/null; then
      if [ "$(id -u)" -eq 0 ]; then apt-get install -y -qq --no-install-recommends npm >/dev/null || true; fi
      command -v npm >/dev/null || { echo "deps: npm missing: tests/kube manifest validation will fail" >&2; return 0; }
    fi
    (cd "$d" && npm ci --no-audit --no-fund --silent) || echo "deps: npm ci in $d failed" >&2
  done
}
trap npm_deps EXIT

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
# The ACP tests (tests/acp) run the npm SDK on Node.js. Debian ships npm as its own package; a
# Node.js from elsewhere (e.g. NodeSource) bundles it, so only ask for it when it is absent.
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing packages: ${missing[*]} (run as root or install them)" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
