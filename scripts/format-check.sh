#!/usr/bin/env bash
# `make format-check`: the C lines this change touches are as clang-format would write them
# (clang-format-diff on the change's diff), not the whole tree or whole files (most of the tree
# predates .clang-format, and reformatting whole files would collide with every parallel branch).
# "This change" is the working tree against the merge base with origin/main; when there is no
# origin/main, no merge base (a shallow clone) or nothing between them (CI builds main itself),
# it is the last commit. Needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! git rev-parse -q --verify HEAD >/dev/null 2>&1; then
  echo "format-check: not a git checkout with commits; nothing to compare, nothing checked"
  exit 0
fi

changed() { git diff --name-only --diff-filter=d "$1" -- '*.c' '*.h'; }

files=""
what=""
base=""
if git rev-parse -q --verify origin/main >/dev/null 2>&1 &&
   base=$(git merge-base HEAD origin/main 2>/dev/null) &&
   [ "$base" != "$(git rev-parse HEAD)" ]; then
  files=$(changed "$base")
  what="changed since the merge base with origin/main (${base:0:12})"
elif git rev-parse -q --verify 'HEAD^' >/dev/null 2>&1; then
  base='HEAD^'
  files=$(changed "$base")
  what="changed by the last commit ($(git rev-parse --short HEAD))"
elif [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  # A depth-1 clone: the parent is not here, so what the last commit changed is unknown.
  echo "format-check: shallow clone without HEAD's parent; nothing to compare, nothing checked"
  exit 0
else
  echo "format-check: the root commit; nothing to compare, nothing checked"
  exit 0
fi

if [ -z "$files" ]; then
  echo "format-check: no C files $what"
  exit 0
fi
n=$(printf '%s\n' "$files" | wc -l)
echo "format-check: the lines of $n C file(s) $what"
fmt_diff=$(command -v clang-format-diff || command -v clang-format-diff-14 || true)
if [ -z "$fmt_diff" ]; then
  echo "format-check: clang-format-diff not found (package clang-format: scripts/deps.sh)" >&2
  exit 1
fi
# What clang-format would change in the touched lines, as a diff: empty when they are as it
# writes them.
out=$(git diff -U0 --no-color --diff-filter=d "$base" -- '*.c' '*.h' | "$fmt_diff" -p1)
if [ -n "$out" ]; then
  printf '%s\n' "$out"
  echo "format-check: the lines above are not as clang-format writes them (make format, or" \
       "clang-format-diff -p1 -i on your diff)" >&2
  exit 1
fi
echo "format-check: ok"
