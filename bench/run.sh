#!/usr/bin/env bash
# `make bench`: runs every bench/bench-*.py against the release build and prints their tables,
# then issue 16's whole table from the rows the benches marked (bench/bench_issue16.py).
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
out=$(mktemp -d /tmp/asb-bench-out.XXXXXX)
trap 'rm -rf "$out"' EXIT
status=0
for b in bench/bench-*.py; do
  name=$(basename "$b" .py)
  echo "== $name.py"
  /usr/bin/python3 bench/bench_quiet.py
  /usr/bin/python3 "$b" 2>&1 | tee "$out/$name.txt" || status=1
  echo
done
/usr/bin/python3 bench/bench_issue16.py summary "$out"/*.txt
exit $status
