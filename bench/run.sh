#!/usr/bin/env bash
# `make bench`: runs every bench/bench-*.py against the release build and prints their tables.
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
status=0
for b in bench/bench-*.py; do
  echo "== $(basename "$b")"
  /usr/bin/python3 "$b" || status=1
  echo
done
exit $status
