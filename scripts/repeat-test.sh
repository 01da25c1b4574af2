#!/usr/bin/env bash
# Runs one pytest selection N times in a row and stops at the first failed run: the check for a
# test that failed now and then. Not part of `make test`. Example (docs/network.md, "Restart"):
#   scripts/repeat-test.sh 50 tests/integration/test_netpol_local.py -k restart
# ASB_BUILD picks the build (default: build, the release build; build/asan runs with the same
# sanitizer options as tests/run-tests.py). Logs of failed runs stay in $TMPDIR.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 N PYTEST-ARGS..." >&2
  exit 2
fi
n=$1
shift
export ASB_BUILD=${ASB_BUILD:-$PWD/build}
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0:exitcode=86
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=87
export PYTHONDONTWRITEBYTECODE=1
start=$SECONDS
for i in $(seq "$n"); do
  log=$(mktemp "${TMPDIR:-/tmp}/repeat-test.XXXXXX")
  t=$SECONDS
  if ! /usr/bin/python3 -m pytest -q -x -p no:cacheprovider "$@" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "run $i failed after $((i - 1)) passed in a row (log: $log)"
    exit 1
  fi
  echo "run $i: $(tail -n 1 "$log") [$((SECONDS - t)) s]"
  rm -f "$log"
done
echo "$n/$n runs passed in a row ($((SECONDS - start)) s)"
