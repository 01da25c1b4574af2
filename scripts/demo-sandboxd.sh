#!/usr/bin/env bash
# The standalone sandboxd demo (was `make demo`; scripts/demo.sh falls back to it without root): start sandboxd on a temporary root and show a file round trip with curl.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(mktemp -d)
sock="$root.rest.sock"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
gport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
build/bin/sandboxd --listen-host 127.0.0.1 --rest-port "$port" --grpc-port "$gport" \
  --root-dir "$root" --rest-socket "$sock" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$root" "$sock"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null && break; sleep 0.05; done

show() { echo; echo "\$ $*"; "$@"; echo; }
show curl -s "http://127.0.0.1:$port/v1/health"
show curl -s -o /dev/null -w 'HTTP %{http_code}\n' -X PUT --data-binary 'hello from the sandbox' \
  "http://127.0.0.1:$port/v1/files/notes%2Fhello.txt?mode=0640"
show curl -s "http://127.0.0.1:$port/v1/files/notes/hello.txt"
show curl -s "http://127.0.0.1:$port/v1/files/notes"
show curl -s --unix-socket "$sock" "http://sandbox/v1/files/"
show curl -s "http://127.0.0.1:$port/v1/files/%2E%2E/%2E%2E/etc/passwd"
echo "\$ grpc Execute [sh -c 'wc -c notes/hello.txt; echo err >&2; exit 3']   (grpcio client)"
/usr/bin/python3 - "127.0.0.1:$gport" <<'PY'
import sys
sys.path.insert(0, "tests/integration")
from grpc_helpers import Client, collect
c = Client(sys.argv[1])
r = c.execute(["sh", "-c", "wc -c notes/hello.txt; echo err >&2; exit 3"])
print(f"exit_code={r.exit_code} stdout={r.stdout!r} stderr={r.stderr!r}")
events, pid, out, err, code = collect(c.start(["sh", "-c", "for i in 1 2 3; do echo tick $i; sleep 0.1; done"]))
print(f"Start stream: process_id={pid} events={events} stdout={out!r} exit={code}")
c.close()
PY
echo
show curl -s -o /dev/null -w 'HTTP %{http_code}\n' -X DELETE "http://127.0.0.1:$port/v1/files/notes?recursive=true"
echo "demo finished: sandboxd served $root on 127.0.0.1:$port (REST) and :$gport (gRPC)"
