#!/usr/bin/env bash
# `make fresh-check`: README's two commands (`make demo`, `make test`) in a pristine Debian bookworm
# root made by ../shared/tools/fresh-root.sh (debootstrap, the committed project cloned in, run as
# root in private mount and pid namespaces, nothing of this machine's packages). It proves that
# scripts/deps.sh installs everything. Ends with the test run's "N passed, N failed" line.
# It checks what is committed (HEAD), not the work tree. Needs root and the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${FRESH_ROOT_TOOL:-../shared/tools/fresh-root.sh}
if [ ! -f "$tool" ]; then
  echo "fresh-check: $tool not found (the shared tools folder beside the project)" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-check: needs root (debootstrap, mount and pid namespaces)" >&2
  exit 2
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "fresh-check: note: uncommitted changes are not checked (the fresh root clones HEAD)" >&2
fi
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
bash "$tool" . "make demo" "make test" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1 || true)
echo "fresh-check: make demo and make test in a fresh bookworm root: rc=$rc"
echo "${line:-0 passed, 1 failed}"
exit "$rc"
