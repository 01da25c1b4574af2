"""`make demo` (scripts/demo.sh) end to end: asb serve, a host-image Sandbox, exec/cp/ls,
suspend/resume, then a warm pool: claim, exec through the claim name, release, refill; cleanup. Without root it falls back to the sandboxd demo (tested too)."""
import os
import subprocess

from asb_apiserver import BUILD, ROOT, SANITIZER_EXIT_CODES
from local_sandbox import injected_sandboxd, runtime_available


def test_demo_script():
    env = {**os.environ, "ASB_BIN": os.path.join(BUILD, "bin")}
    for k in ("ASB_SERVER", "ASB_TOKEN", "ASB_STATE_DIR"):
        env.pop(k, None)
    why = runtime_available()
    if not why:
        env["ASB_SANDBOXD"] = injected_sandboxd()
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "demo.sh")], capture_output=True,
                       text=True, env=env, timeout=300, cwd="/")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert p.returncode not in SANITIZER_EXIT_CODES
    assert "ERROR: AddressSanitizer" not in out and "runtime error:" not in out, out
    if why:
        assert "running the standalone sandboxd demo instead" in out, out
        return
    assert "sum of squares 1..100 = 338350" in p.stdout, out
    assert "hello from the sandbox" in p.stdout
    assert "1267650600228229401496703205376" in p.stdout
    assert "round trip: LINE ONE LINE TWO" in p.stdout
    assert "exit code: 3" in p.stdout
    # The warm pool part: a claim served from the pool, code run in it, released, refilled.
    assert "claimed sandbox python-pool-" in p.stdout and "says: hello from a warm sandbox" in p.stdout
    assert "primes below 50: [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47]" in p.stdout
    assert " ready in " in p.stdout and "released" in p.stdout
    refilled = p.stdout.split("pool refilled:")[1]
    assert "python-pool   2       2" in refilled, out
    assert "demo finished" in p.stdout
    state = [line.split("state in ")[1].rstrip(")") for line in p.stdout.splitlines() if "state in " in line]
    assert state and not os.path.exists(state[0])
