"""A burst of concurrent claims on a warm pool (issue 16): the controller adopts the claims that
arrive together in one store transaction and refills the pool in another. Each claim still gets
its own sandbox, and an `asb serve` killed in the middle of a burst loses no claim and gives no
sandbox to two claims."""
import threading
from concurrent.futures import ThreadPoolExecutor

from asb_apiserver import CORE, EXT
from claims_helpers import (claim, create, is_ready, items, pool, template, wait_claim,
                            wait_for, wait_pool_ready)
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)

N = 16


def owners(sb):
    return [r for r in sb["metadata"].get("ownerReferences") or [] if r.get("controller")]


def check_one_sandbox_per_claim(asb):
    """Every stored claim is Ready with its own sandbox, which it alone owns."""
    claims = items(asb, EXT, "sandboxclaims")
    sandboxes = {s["metadata"]["name"]: s for s in items(asb, CORE, "sandboxes")}
    got = {}
    for c in claims:
        name = c["status"]["sandbox"]["name"]
        sb = sandboxes[name]
        refs = owners(sb)
        assert len(refs) == 1 and refs[0]["uid"] == c["metadata"]["uid"], (c, sb)
        assert is_ready(sb), sb
        got[c["metadata"]["name"]] = name
    assert len(set(got.values())) == len(got), f"a sandbox went to two claims: {got}"
    claim_owned = [s for s in sandboxes.values()
                   if owners(s) and owners(s)[0]["kind"] == "SandboxClaim"]
    assert len(claim_owned) == len(claims), "a claim-owned sandbox without its claim"
    return got


def test_burst_adopts_together_and_refills(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=N))
    warm = {m["metadata"]["name"] for m in wait_pool_ready(asb, "wp", N, timeout=240)}
    barrier = threading.Barrier(N)

    def make(i):
        barrier.wait()
        r = asb.post(asb.path(EXT, "sandboxclaims"), claim(f"b-{i}", "wp"))
        assert r.status_code == 201, r.text

    with ThreadPoolExecutor(N) as ex:
        list(ex.map(make, range(N)))
    for i in range(N):
        wait_claim(asb, f"b-{i}", timeout=60)
    got = check_one_sandbox_per_claim(asb)
    assert set(got.values()) == warm, "every claim was served warm"
    # The pool refills with new members, none of the adopted ones.
    ms = wait_pool_ready(asb, "wp", N, timeout=240)
    assert not warm & {m["metadata"]["name"] for m in ms}


def test_burst_survives_a_kill_of_asb_serve(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=N))
    wait_pool_ready(asb, "wp", N, timeout=240)
    barrier = threading.Barrier(N + 1)

    def make(i):
        barrier.wait()
        try:
            asb.post(asb.path(EXT, "sandboxclaims"), claim(f"k-{i}", "wp"))
        except Exception:  # noqa: BLE001  the server may be killed under this request
            pass

    with ThreadPoolExecutor(N) as ex:
        futs = [ex.submit(make, i) for i in range(N)]
        barrier.wait()

        def some_adopted():
            try:
                return any((c.get("status") or {}).get("sandbox")
                           for c in items(asb, EXT, "sandboxclaims"))
            except Exception:  # noqa: BLE001
                return False
        wait_for("a first adoption", some_adopted, 60, 0.002)
        asb.kill9()  # in the middle of the burst: some claims adopted, some not yet
        for f in futs:
            f.result()
    asb = start_sbx()
    stored = [c["metadata"]["name"] for c in items(asb, EXT, "sandboxclaims")]
    assert stored, "the claims committed before the kill are kept"
    for name in stored:
        wait_claim(asb, name, timeout=120)
    check_one_sandbox_per_claim(asb)
    wait_pool_ready(asb, "wp", N, timeout=240)
