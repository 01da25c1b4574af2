#!/usr/bin/env bash
# embed.sh FILE SYMBOL: prints a C file defining SYMBOL (bytes) and SYMBOL_len.
set -euo pipefail
echo "#include <stddef.h>"
echo "const unsigned char $2[] = {"
od -An -v -tx1 "$1" | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'
echo "};"
echo "const size_t $2_len = sizeof($2);"
