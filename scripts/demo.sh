#!/usr/bin/env bash
# `make demo`: the local control plane. Starts `asb serve` on a temporary state directory and a
# free loopback port, creates a Sandbox from examples/sandbox-python.yaml (image `host`), waits for
# Ready, runs Python code in it with `asb exec`, round-trips a file with `asb cp` and `asb ls`,
# suspends and resumes it, deletes it; then a template and a warm pool of 2
# (examples/warm-pool-python.yaml): a claim served warm with its latency, code run in it through
# the claim name, the claim released and the pool refilled; and stops the server. Sandboxes need root and runc: without
# them it says so and runs the standalone sandboxd demo (scripts/demo-sandboxd.sh) instead.
# ASB_BIN (default build/bin) picks the binaries; ASB_SANDBOXD the sandboxd injected.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${ASB_BIN:-build/bin}
runc=${ASB_RUNTIME:-$(command -v runc || echo /usr/sbin/runc)}
if [ "$(id -u)" != 0 ] || [ ! -x "$runc" ]; then
  if [ "$(id -u)" != 0 ]; then why="not running as root"; else why="runc is not installed"; fi
  echo "make demo: local sandboxes cannot run here ($why: asb serve needs root and runc)."
  echo "make demo: running the standalone sandboxd demo instead (scripts/demo-sandboxd.sh)."
  exec bash scripts/demo-sandboxd.sh
fi

# Unix socket paths must stay under 108 bytes: keep the state directory short.
state=$(mktemp -d /tmp/asb-demo-XXXXXX)
export ASB_STATE_DIR=$state
unset ASB_SERVER ASB_TOKEN
server_pid=
cleanup() {
  set +e
  if [ -n "$server_pid" ]; then
    "$bin/asb" delete sandbox python-demo --ignore-not-found >/dev/null 2>&1
    "$bin/asb" wait --for=delete sandbox/python-demo --timeout 10s >/dev/null 2>&1
    "$bin/asb" delete -f examples/warm-pool-python.yaml --ignore-not-found >/dev/null 2>&1
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  # Anything the server left behind (it was killed, or the delete failed).
  for id in $("$runc" --root "$state/runc" list -q 2>/dev/null); do
    "$runc" --root "$state/runc" delete --force "$id" >/dev/null 2>&1
  done
  for ns in "$state"/net/*/ns; do [ -e "$ns" ] && umount -l "$ns" 2>/dev/null; done
  # Ephemeral storage: an ext4 image per sandbox, loop-mounted (autoclear) at sandboxes/<uid>/disk.
  for disk in "$state"/sandboxes/*/disk; do [ -d "$disk" ] && umount "$disk" 2>/dev/null; done
  rm -rf "$state" "$work"
}
work=$(mktemp -d)
trap cleanup EXIT
trap 'exit 130' INT TERM

# Loopback-only sandboxes unless ASB_NETWORK=bridge: the demo leaves no bridge or nft table on the
# machine (docs/network.md).
ASB_NETWORK=${ASB_NETWORK:-none} ASB_RUNTIME=$runc "$bin/asb" serve --listen 127.0.0.1:0 >"$work/asb-serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 200); do
  [ -s "$state/server" ] && "$bin/asb" get sandboxes >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/asb-serve.log"; echo "asb serve exited"; exit 1; }
  sleep 0.05
done
echo "asb serve is listening on $(cat "$state/server") (state in $state)"

show() { echo; printf '$ asb'; printf ' %q' "$@"; echo; "$bin/asb" "$@"; }
show apply -f examples/sandbox-python.yaml
show wait --for=condition=Ready sandbox/python-demo --timeout 30s
show get sandboxes -o wide

echo; echo '$ asb exec python-demo -- python3 -c "..."'
"$bin/asb" exec python-demo -- python3 -c '
import os, platform, socket
print("python", platform.python_version(), "on", socket.gethostname(), "as uid", os.getuid())
print(os.environ["GREETING"])
print("sum of squares 1..100 =", sum(i * i for i in range(1, 101)))'

printf 'line one\nline two\n' >"$work/notes.txt"
show cp "$work/notes.txt" python-demo:notes/notes.txt
show exec python-demo -- python3 -c 'import pathlib; p = pathlib.Path("notes/notes.txt"); p.write_text(p.read_text().upper())'
show ls python-demo
show ls python-demo:notes
show cp python-demo:notes/notes.txt "$work/back.txt"
echo "round trip: $(tr '\n' ' ' <"$work/back.txt")"
echo; echo '$ echo "print(2 ** 100)" | asb exec -i python-demo -- python3 -'
echo "print(2 ** 100)" | "$bin/asb" exec -i python-demo -- python3 -
echo; echo "\$ asb exec python-demo -- sh -c 'exit 3'"
rc=0; "$bin/asb" exec python-demo -- sh -c 'exit 3' || rc=$?
echo "exit code: $rc"

show suspend python-demo
show wait --for=condition=Suspended sandbox/python-demo --timeout 30s
show resume python-demo
show wait --for=condition=Ready sandbox/python-demo --timeout 30s
show exec python-demo -- cat notes/notes.txt

show delete sandbox python-demo
show wait --for=delete sandbox/python-demo --timeout 30s

echo; echo "== Warm pool: a sandbox in milliseconds =="
show apply -f examples/warm-pool-python.yaml
# Wait until both pool members are Ready (the pool's READY column reaches 2).
show wait --for=jsonpath='{.status.readyReplicas}'=2 sandboxwarmpool/python-pool --timeout 60s
show get warmpools
show get sandboxes
echo; echo '$ sbx=$(asb claim --pool python-pool --ttl 10m)'
sbx=$("$bin/asb" claim --pool python-pool --ttl 10m 2>"$work/claim.err")
cat "$work/claim.err"
claim=$(sed -n 's/^claim \([^ ]*\) ready.*/\1/p' "$work/claim.err")
echo "sandbox: $sbx (claim $claim)"
echo; echo "\$ asb exec $claim -- python3 -c \"...\""
"$bin/asb" exec "$claim" -- python3 -c '
import os, socket
print("claimed sandbox", socket.gethostname(), "says:", os.environ["GREETING"])
print("primes below 50:", [n for n in range(2, 50) if all(n % d for d in range(2, n))])'
echo; echo "== The same sandbox as an MCP tool (asb mcp, stdio; docs/mcp.md) =="
call='{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_command","arguments":{"sandbox_claim_name":"'"$claim"'","command":"echo hello from $(hostname); python3 -c \"print(6*7)\""}}}'
echo "> $call"
printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$call" |
  "$bin/asb" mcp | sed -n '2s/^/< /p'
show get claims
show release --wait "$claim"
"$bin/asb" wait --for=jsonpath='{.status.readyReplicas}'=2 sandboxwarmpool/python-pool --timeout 60s >/dev/null
echo; echo "pool refilled:"
show get warmpools
show get sandboxes
show delete -f examples/warm-pool-python.yaml

kill "$server_pid"
rc=0; wait "$server_pid" || rc=$?
server_pid=
if [ "$rc" != 0 ]; then echo "asb serve exited with status $rc:"; cat "$work/asb-serve.log"; exit 1; fi
echo
echo "demo finished: asb serve stopped, state directory removed"
