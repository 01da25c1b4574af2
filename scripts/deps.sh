#!/usr/bin/env bash
# Installs exactly what the build, the tests and the benchmarks need, every piece named explicitly:
# nothing may arrive only as a recommendation (we install with --no-install-recommends) or be left
# over from an earlier session. Then the Node packages pinned by each lock file under tests/.
# Idempotent and fast when everything is present (one dpkg-query per package, lock stamps for npm).
# Fails loudly: any install step that fails makes this script exit non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  # toolchain, fuzzing (clang + libFuzzer runtime), checks
  build-essential pkg-config binutils clang libclang-rt-14-dev valgrind
  # make format, make format-check (.ci/run)
  clang-format
  # libraries (pkg-config names in the Makefile's PKGS) and code generators
  libmicrohttpd-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
  # protoc, and google/protobuf/*.proto (empty.proto is compiled by protoc-c and embedded)
  protobuf-compiler libprotobuf-dev
  libjansson-dev libuv1-dev libsqlite3-dev libcurl4-openssl-dev libyaml-dev libarchive-dev
  libhttp-parser-dev libnftables-dev libnftnl-dev libmnl-dev
  # snapshots (local-snapshot-store.c): zstd compression, SHA-256 object names
  libzstd-dev libssl-dev
  # runtime: OCI runtime and image unpacker, networking, process tools
  runc umoci iproute2 nftables procps util-linux curl openssl ca-certificates
  # runtimeClassName: gvisor (docs/local-sandboxes.md: what Debian's 2022 build supports)
  runsc
  # ephemeral storage of local sandboxes: mke2fs makes their ext4 images (local-scratch.c)
  e2fsprogs
  # test and benchmark clients (Debian's Python modules live in /usr/bin/python3)
  python3 python3-pytest python3-requests python3-urllib3 python3-grpcio python3-protobuf
  python3-kubernetes python3-yaml
  # a real browser for the router's preview hosts (tests/integration/test_router_ports.py)
  chromium
  # ACP SDK tests and manifest validation (npm lock files under tests/)
  nodejs
)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
# Debian ships npm as its own package; a Node.js from elsewhere (NodeSource) bundles it, so only
# ask for it when no npm is on PATH.
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing packages: ${missing[*]} (run as root or install them)" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || { echo "deps: apt-get update failed" >&2; exit 1; }
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { echo "deps: apt-get install ${missing[*]} failed" >&2; exit 1; }
fi

# Node packages, once, for every folder under tests/ and tools/ with a lock file (tools/k8s-openapi:
# the Kubernetes schemas, pinned, that scripts/gen-crds.py expands into deploy/crds). A stamp newer
# than the lock file means node_modules was installed from exactly that lock.
for lock in tests/*/package-lock.json tools/*/package-lock.json; do
  d=$(dirname "$lock")
  stamp=$d/node_modules/.package-lock.json
  [ -f "$stamp" ] && [ "$stamp" -nt "$lock" ] && continue
  echo "deps: npm ci in $d" >&2
  if ! (cd "$d" && npm ci --no-audit --no-fund --loglevel=error); then
    echo "deps: npm ci in $d failed (the npm registry must be reachable)" >&2
    exit 1
  fi
done
