#!/usr/bin/env bash
# `make format-check`: clang-format --dry-run -Werror on the C files this change touches, not on
# the whole tree (most of it predates .clang-format). "This change" is the working tree against
# the merge base with origin/main; when there is no origin/main, no merge base (a shallow clone)
# or nothing between them (CI builds main itself), it is the last commit. Needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! git rev-parse -q --verify HEAD >/dev/null 2>&1; then
  echo "format-check: not a git checkout with commits; nothing to compare, nothing checked"
  exit 0
fi

changed() { git diff --name-only --diff-filter=d "$1" -- '*.c' '*.h'; }

files=""
what=""
if git rev-parse -q --verify origin/main >/dev/null 2>&1 &&
   base=$(git merge-base HEAD origin/main 2>/dev/null) &&
   [ "$base" != "$(git rev-parse HEAD)" ]; then
  files=$(changed "$base")
  what="changed since the merge base with origin/main (${base:0:12})"
elif git rev-parse -q --verify 'HEAD^' >/dev/null 2>&1; then
  files=$(changed 'HEAD^')
  what="changed by the last commit ($(git rev-parse --short HEAD))"
elif [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  # A depth-1 clone: the parent is not here, so what the last commit changed is unknown.
  echo "format-check: shallow clone without HEAD's parent; nothing to compare, nothing checked"
  exit 0
else
  files=$(git ls-files -- '*.c' '*.h')
  what="of the root commit"
fi

if [ -z "$files" ]; then
  echo "format-check: no C files $what"
  exit 0
fi
n=$(printf '%s\n' "$files" | wc -l)
echo "format-check: $n C file(s) $what"
# Fails on the first file that `make format` would change, naming the lines.
printf '%s\n' "$files" | xargs -d '\n' clang-format --dry-run -Werror
