#!/usr/bin/env bash
# `make images`: OCI image layouts for sandboxd, asb-controller and sandbox-router without a
# container daemon. Each root filesystem is assembled from the built binary and the shared
# libraries ldd lists for it (at their host paths, with the loader), and written as an OCI image
# layout with umoci (build/images/<name>, tag 0.1.0) plus an oci-archive tarball
# (build/images/<name>.tar) for `kind load image-archive` or `skopeo copy oci-archive:...`.
#
# The sandboxd image follows upstream's: sandboxd at /usr/local/bin/sandboxd as entrypoint,
# /workspace owned by 1000:1000, user 1000, ports 8080/9090, with sh and coreutils for commands;
# /opt/asb holds a self-contained copy (bin/sandboxd, lib/ with ld.so) that
# /usr/local/bin/sandboxd-install DIR copies into a shared volume, so an initContainer can inject
# sandboxd into an unmodified image (deploy/samples/sandboxtemplate-inject.yaml).
#
# Usage: scripts/make-images.sh [BIN_DIR [OUT_DIR [NAMES...]]]
set -euo pipefail

BIN=${1:-build/bin}
OUT=${2:-build/images}
shift $(( $# > 2 ? 2 : $# )) || true
NAMES=("$@")
EXPLICIT=1
[ ${#NAMES[@]} -gt 0 ] || { NAMES=(sandboxd asb-controller sandbox-router); EXPLICIT=0; }
TAG=0.1.0
UMOCI=${UMOCI:-umoci}
ROOTLESS=()
[ "$(id -u)" -eq 0 ] || ROOTLESS=(--rootless)

command -v "$UMOCI" >/dev/null || { echo "make-images: umoci not installed (scripts/deps.sh)" >&2; exit 1; }

# Work directories go on exit too: a failing step under `set -e` ends the script inside
# build_one, where a RETURN trap never runs.
WORK=""
trap '[ -z "$WORK" ] || rm -rf "$WORK"' EXIT

# Copies FILE and its shared-library closure into ROOT at the same paths.
copy_closure() {
  local root=$1 file=$2 dest=${3:-$2}
  install -D -m 0755 "$(readlink -f "$file")" "$root$dest"
  local lib
  for lib in $(ldd "$file" 2>/dev/null | grep -o '/[^ ]*' | sort -u); do
    [ -e "$lib" ] || continue
    install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
  done
}

# Libraries libasb opens with dlopen when first needed, which ldd does not list: libyaml
# (src/libasb/libasb-yaml.c) parses a kubeconfig written in YAML.
dlopen_extras() {
  local root=$1 soname lib
  for soname in libyaml-0.so.2; do
    # awk reads to the end: an early exit would SIGPIPE ldconfig, which pipefail makes fatal.
    lib=$(ldconfig -p | awk -v s="$soname" '$1 == s && lib == "" { lib = $NF } END { print lib }')
    [ -n "$lib" ] || { echo "make-images: $soname not found (ldconfig -p)" >&2; return 1; }
    copy_closure "$root" "$lib"
  done
}

write_etc() {
  local root=$1
  mkdir -p "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/bin/sh\nsandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\nsandbox:x:1000:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  fi
}

sandboxd_extras() {
  local root=$1
  local tool
  for tool in /bin/sh /bin/cp /bin/ls /bin/cat /bin/mkdir /bin/rm /bin/mv /bin/echo /bin/env; do
    [ -e "$tool" ] && copy_closure "$root" "$tool"
  done
  # Self-contained copy for injection: bin/sandboxd + lib/ (its libraries and the loader).
  install -D -m 0755 "$BIN/sandboxd" "$root/opt/asb/bin/sandboxd"
  local lib loader=""
  for lib in $(ldd "$BIN/sandboxd" | grep -o '/[^ ]*' | sort -u); do
    install -D -m 0755 "$(readlink -f "$lib")" "$root/opt/asb/lib/$(basename "$lib")"
    case "$(basename "$lib")" in ld-linux*|ld64*) loader=$(basename "$lib") ;; esac
  done
  [ -n "$loader" ] && ln -sf "$loader" "$root/opt/asb/lib/ld.so"
  cat >"$root/usr/local/bin/sandboxd-install" <<'EOF'
#!/bin/sh
# sandboxd-install DIR: copy sandboxd with its libraries and loader into DIR (a shared volume);
# run it there as DIR/lib/ld.so --library-path DIR/lib DIR/bin/sandboxd.
set -e
[ -n "$1" ] || { echo "usage: sandboxd-install DIR" >&2; exit 2; }
mkdir -p "$1"
cp -a /opt/asb/. "$1/"
EOF
  chmod 0755 "$root/usr/local/bin/sandboxd-install"
  mkdir -p "$root/workspace"
  chown 1000:1000 "$root/workspace" 2>/dev/null || true
}

build_one() {
  local name=$1
  local work layout="$OUT/$name"
  if [ ! -x "$BIN/$name" ]; then
    # Explicitly named images must exist; of the default set, missing ones are reported.
    echo "make-images: $BIN/$name missing (run make): skipped" >&2
    [ "$EXPLICIT" = 1 ] && return 1
    return 0
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/asb-image-XXXXXX")
  WORK=$work
  rm -rf "$layout" "$OUT/$name.tar"
  mkdir -p "$OUT"
  "$UMOCI" init --layout "$layout"
  "$UMOCI" new --image "$layout:$TAG"
  "$UMOCI" unpack "${ROOTLESS[@]}" --image "$layout:$TAG" "$work/bundle" >/dev/null
  local root="$work/bundle/rootfs"
  copy_closure "$root" "$BIN/$name" "/usr/local/bin/$name"
  local user=65532 workdir=/ ports=()
  write_etc "$root"
  case "$name" in
    sandboxd)
      sandboxd_extras "$root"
      user=1000 workdir=/workspace ports=(--config.exposedports 8080/tcp --config.exposedports 9090/tcp) ;;
    asb-controller)
      dlopen_extras "$root"
      ports=(--config.exposedports 8080/tcp --config.exposedports 8081/tcp) ;;
    sandbox-router) ports=(--config.exposedports 8080/tcp) ;;
  esac
  "$UMOCI" repack --image "$layout:$TAG" "$work/bundle" >/dev/null
  "$UMOCI" config --image "$layout:$TAG" --config.entrypoint "/usr/local/bin/$name" \
    --config.user "$user" --config.workingdir "$workdir" "${ports[@]}" \
    --config.env PATH=/usr/local/bin:/usr/bin:/bin \
    --config.label "org.opencontainers.image.title=$name" \
    --config.label "org.opencontainers.image.version=$TAG" \
    --author agent-sandbox-c --architecture "$(dpkg --print-architecture 2>/dev/null || echo amd64)" --os linux
  "$UMOCI" gc --layout "$layout"
  tar -C "$layout" -cf "$OUT/$name.tar" .
  rm -rf "$work"
  WORK=""
  echo "  IMAGE   $layout:$TAG ($OUT/$name.tar)"
}

for n in "${NAMES[@]}"; do
  build_one "$n"
done
