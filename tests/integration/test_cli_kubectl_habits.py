"""kubectl habits against a real `asb serve` (issue 17): Events (events.k8s.io/v1) recorded by the
controllers, `asb get events [--for]`, `asb describe`, `asb get -w`, `-o jsonpath=`,
`-o custom-columns=`, `-l`, `-A`, `asb delete --all`, `asb version`, `asb completion`, and the
Prometheus /metrics endpoint. ASB_RUNTIME=none: the controllers run, sandboxes are not started."""
import json
import os
import re
import subprocess
import time

import requests

from asb_apiserver import CORE, EXT, V, asb, asb_binary, sandbox, start_asb  # noqa: F401 (fixtures)
from asb_cli import SANITIZER_EXIT_CODES, cli_env, ok, run
from waiting import wait_for

EVENTS = "/apis/events.k8s.io/v1"


def template(name):
    return {"apiVersion": f"{EXT}/{V}", "kind": "SandboxTemplate", "metadata": {"name": name},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}}


def pool(name, tmpl, replicas):
    return {"apiVersion": f"{EXT}/{V}", "kind": "SandboxWarmPool", "metadata": {"name": name},
            "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": tmpl}}}


def claim(name, pool_name):
    return {"apiVersion": f"{EXT}/{V}", "kind": "SandboxClaim", "metadata": {"name": name},
            "spec": {"warmPoolRef": {"name": pool_name}}}


def create(asb, kind_plural, group, body, ns="default"):
    r = asb.post(asb.path(group, kind_plural, ns), body)
    assert r.status_code == 201, r.text
    return r.json()


def events(asb, ns="default"):
    r = asb.get(f"{EVENTS}/namespaces/{ns}/events")
    assert r.status_code == 200, r.text
    assert r.json()["kind"] == "EventList"
    return r.json()["items"]


def about(evs, kind, name):
    return [e for e in evs if e["regarding"]["kind"] == kind and e["regarding"]["name"] == name]


def pool_and_claim(asb, replicas=1):
    create(asb, "sandboxtemplates", EXT, template("t1"))
    create(asb, "sandboxwarmpools", EXT, pool("p1", "t1", replicas))
    create(asb, "sandboxclaims", EXT, claim("c1", "p1"))
    return wait_for(lambda: (len(about(events(asb), "SandboxWarmPool", "p1")) >= replicas
                             and about(events(asb), "SandboxClaim", "c1")),
                    timeout=20, what="pool and claim events")


def test_controllers_record_events(asb):
    pool_and_claim(asb, replicas=2)
    evs = events(asb)
    created = about(evs, "SandboxWarmPool", "p1")
    assert len(created) >= 2
    for e in created:
        assert e["apiVersion"] == "events.k8s.io/v1" and e["kind"] == "Event"
        assert e["reason"] == "SuccessfulCreate" and e["type"] == "Normal"
        assert e["action"] == "Create" and e["reportingController"] == "asb-serve-controller"
        assert e["note"].startswith("created warm sandbox p1-")
        assert e["regarding"]["apiVersion"] == f"{EXT}/{V}" and e["regarding"]["uid"]
        assert e["metadata"]["name"].startswith("p1.") and e["metadata"]["namespace"] == "default"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", e["eventTime"])
    [c] = about(evs, "SandboxClaim", "c1")
    # No Ready warm member without a runtime: the claim provisions a cold sandbox.
    assert c["reason"] == "SandboxProvisioned" and c["action"] == "Create"
    # One object and a list across namespaces.
    name = c["metadata"]["name"]
    assert asb.get(f"{EVENTS}/namespaces/default/events/{name}").json()["note"] == c["note"]
    assert any(e["metadata"]["name"] == name for e in asb.get(f"{EVENTS}/events").json()["items"])


def test_events_are_read_only_and_deletable(asb):
    pool_and_claim(asb)
    body = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "x"},
            "reason": "Fake", "note": "n", "type": "Normal", "action": "A",
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "me",
            "reportingInstance": "me", "regarding": {"kind": "Sandbox", "name": "x"}}
    r = asb.post(f"{EVENTS}/namespaces/default/events", body)
    assert r.status_code == 405 and r.json()["reason"] == "MethodNotAllowed", r.text
    r = asb.merge_patch(f"{EVENTS}/namespaces/default/events/x", {"note": "y"})
    assert r.status_code == 405, r.text
    name = events(asb)[0]["metadata"]["name"]
    assert asb.delete(f"{EVENTS}/namespaces/default/events/{name}").status_code == 200
    assert asb.get(f"{EVENTS}/namespaces/default/events/{name}").status_code == 404
    # deletecollection empties the namespace's events (the controllers record new ones later).
    assert asb.delete(f"{EVENTS}/namespaces/default/events").status_code == 200
    assert events(asb) == []
    # Unknown versions of the group are not served.
    assert asb.get("/apis/events.k8s.io/v1beta1/namespaces/default/events").status_code == 404


def test_events_retention_per_object(asb):
    """A pool that creates more sandboxes than the per-object bound keeps only the newest 20."""
    create(asb, "sandboxtemplates", EXT, template("t1"))
    create(asb, "sandboxwarmpools", EXT, pool("big", "t1", 26))
    wait_for(lambda: len(asb.get(asb.path(CORE, "sandboxes")).json()["items"]) == 26,
             timeout=20, what="26 pool members")
    time.sleep(0.3)
    mine = about(events(asb), "SandboxWarmPool", "big")
    assert len(mine) == 20, len(mine)
    members = {m["metadata"]["name"] for m in asb.get(asb.path(CORE, "sandboxes")).json()["items"]}
    noted = {e["note"].rsplit(" ", 1)[1] for e in mine}
    assert noted < members  # the newest 20 of the 26 creations


def test_events_watch(asb):
    create(asb, "sandboxtemplates", EXT, template("t1"))
    rv = asb.get(f"{EVENTS}/namespaces/default/events").json()["metadata"]["resourceVersion"]
    with asb.session.get(asb.url + f"{EVENTS}/namespaces/default/events",
                         params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "10"},
                         stream=True, timeout=15) as w:
        create(asb, "sandboxwarmpools", EXT, pool("p1", "t1", 1))
        for line in w.iter_lines():
            ev = json.loads(line)
            assert ev["type"] == "ADDED" and ev["object"]["kind"] == "Event"
            assert ev["object"]["regarding"]["name"] == "p1"
            break


def test_get_events_table_and_for(asb):
    pool_and_claim(asb)
    out = ok(asb, "get", "events")
    lines = out.splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any("SuccessfulCreate" in line and "sandboxwarmpool/p1" in line for line in lines)
    out = ok(asb, "get", "ev", "--for", "claim/c1", "-o", "json")
    items = json.loads(out)["items"]
    assert [e["regarding"]["name"] for e in items] == ["c1"]
    assert items[0]["reason"] == "SandboxProvisioned"
    wide = ok(asb, "get", "events", "--for", "SandboxClaim/c1", "-o", "wide").splitlines()
    assert wide[0].split()[4:6] == ["OBJECT", "SOURCE"] and "asb-serve-controller" in wide[1]
    p = run(asb, "get", "sandboxes", "--for", "claim/c1")
    assert p.returncode == 2 and "--for selects events" in p.stderr
    p = run(asb, "get", "events", "--for", "claim")
    assert p.returncode == 2 and "KIND/NAME" in p.stderr


def test_describe(asb):
    pool_and_claim(asb)
    out = ok(asb, "describe", "claim", "c1")
    assert re.search(r"^Name:\s+c1$", out, re.M) and re.search(r"^Kind:\s+SandboxClaim$", out, re.M)
    assert re.search(r"^Sandbox:\s+c1$", out, re.M)
    assert re.search(r"^Spec:\n  warmPoolRef:\n    name: p1$", out, re.M)
    cond = re.search(r"^Conditions:\n  Type\s+Status\s+Reason\s+Age\s+Message\n(.*)$", out, re.M)
    assert cond and cond.group(1).split()[:2] == ["Ready", "False"], out
    ev = re.search(r"^Events:\n  Type\s+Reason\s+Age\s+From\s+Message\n(.*)$", out, re.M)
    assert ev and "SandboxProvisioned" in ev.group(1) and "asb-serve-controller" in ev.group(1)
    sb = ok(asb, "describe", "sandbox/c1")
    assert re.search(r"^Controlled By:\s+SandboxClaim/c1$", sb, re.M)
    assert re.search(r"^Claim:\s+c1$", sb, re.M)
    assert re.search(r"^Pod IPs:\s+<none>$", sb, re.M)
    assert re.search(r"^Network Policy:\s+loopback-only$", sb, re.M)
    assert re.search(r"^Labels:\s+agents\.x-k8s\.io/claim-uid=", sb, re.M)
    # A sandbox with limits, and one with no events.
    asb.create_sandbox("lim", podTemplate={"spec": {"containers": [
        {"name": "main", "image": "host", "resources": {"limits": {"memory": "256Mi"}}}]}})
    out = ok(asb, "describe", "sbx", "lim")
    assert re.search(r"^Limits:\s+memory=256Mi$", out, re.M)
    assert re.search(r"^Events:\s+<none>$", out, re.M)
    # The events of an earlier object of the same name (another uid) are not shown.
    assert "SuccessfulCreate" in ok(asb, "describe", "swp", "p1")
    assert asb.delete(asb.path(EXT, "sandboxwarmpools", name="p1")).status_code == 200
    create(asb, "sandboxwarmpools", EXT, pool("p1", "t1", 0))
    assert re.search(r"^Events:\s+<none>$", ok(asb, "describe", "swp", "p1"), re.M)
    p = run(asb, "describe", "sbx", "missing")
    assert p.returncode == 1 and 'sandboxes.agents.x-k8s.io "missing" not found' in p.stderr


def read_line_with(proc, needle, timeout=15):
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} not printed: {seen}")


def test_get_watch_prints_rows_as_they_change(asb):
    asb.create_sandbox("first")
    proc = subprocess.Popen([asb_binary(), "get", "sbx", "-w"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(asb))
    try:
        head = read_line_with(proc, "first")
        assert head[0].split() == ["NAME", "READY", "REASON", "AGE"]
        asb.create_sandbox("second", labels={"x": "y"})
        later = read_line_with(proc, "second")
        assert all(not line.startswith("NAME") for line in later)  # no second header
        asb.merge_patch(asb.path(CORE, "sandboxes", name="first"), {"metadata": {"labels": {"a": "b"}}})
        read_line_with(proc, "first")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert proc.returncode not in SANITIZER_EXIT_CODES


def test_get_watch_one_object_as_json(asb):
    asb.create_sandbox("one")
    asb.create_sandbox("other")
    proc = subprocess.Popen([asb_binary(), "get", "sbx", "one", "-w", "-o", "jsonpath={.metadata.labels.v}{\"\\n\"}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(asb))
    try:
        assert proc.stdout.readline() == "\n"  # the object as it is: no label yet
        asb.merge_patch(asb.path(CORE, "sandboxes", name="other"), {"metadata": {"labels": {"v": "no"}}})
        asb.merge_patch(asb.path(CORE, "sandboxes", name="one"), {"metadata": {"labels": {"v": "2"}}})
        assert proc.stdout.readline() == "2\n"  # only the named object
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert proc.returncode == 0


def test_output_jsonpath_custom_columns_selectors(asb):
    asb.create_sandbox("a1", labels={"app": "web", "agents.x-k8s.io/tier": "x"})
    asb.create_sandbox("a2", labels={"app": "db"})
    r = asb.post(asb.path(CORE, "sandboxes", "other"), sandbox("o1"))
    assert r.status_code == 201, r.text
    assert ok(asb, "get", "sbx", "-o", "jsonpath={.items[*].metadata.name}") == "a1 a2"
    assert ok(asb, "get", "sbx", "a1", "-o", "jsonpath={.metadata.labels.app}") == "web"
    out = ok(asb, "get", "sbx", "-o",
             'jsonpath={range .items[*]}{.metadata.name}{"\\t"}{.metadata.labels.app}{"\\n"}{end}')
    assert out == "a1\tweb\na2\tdb\n"
    out = ok(asb, "get", "sbx", "-l", "app=web", "-o",
             "custom-columns=NAME:.metadata.name,TIER:.metadata.labels.agents\\.x-k8s\\.io/tier,"
             "IP:.status.podIPs[0]")
    assert out.splitlines() == ["NAME   TIER   IP", "a1     x      <none>"]
    out = ok(asb, "get", "sbx", "-A", "-o", "custom-columns=NS:.metadata.namespace,N:{.metadata.name}")
    assert out.splitlines() == ["NS        N", "default   a1", "default   a2", "other     o1"]
    p = run(asb, "get", "sbx", "-o", "custom-columns=broken")
    assert p.returncode == 1 and "HEADER:PATH" in p.stderr
    p = run(asb, "get", "sbx", "-o", "jsonpath={.items[")
    assert p.returncode == 1 and "error parsing jsonpath" in p.stderr
    p = run(asb, "get", "sbx", "-o", "bogus")
    assert p.returncode == 2 and "custom-columns,json,jsonpath,name,wide,yaml" in p.stderr


def test_delete_all_and_selector(asb):
    for n, app in (("d1", "web"), ("d2", "web"), ("d3", "db")):
        asb.create_sandbox(n, labels={"app": app})
    out = ok(asb, "delete", "sbx", "-l", "app=web", "--wait=false")
    assert sorted(out.splitlines()) == ['sandbox.agents.x-k8s.io "d1" deleted',
                                        'sandbox.agents.x-k8s.io "d2" deleted']
    out = ok(asb, "delete", "sbx", "--all")
    assert out == 'sandbox.agents.x-k8s.io "d3" deleted\n'
    assert asb.get(asb.path(CORE, "sandboxes")).json()["items"] == []
    p = run(asb, "delete", "sbx", "--all")
    assert p.returncode == 0 and "No resources found" in p.stderr
    p = run(asb, "delete", "sbx", "x", "--all")
    assert p.returncode == 2 and "no names" in p.stderr


def test_version(asb):
    out = ok(asb, "version")
    assert re.fullmatch(r"Client Version: v\d+\.\d+\.\d+\nServer Version: v\d+\.\d+\.\d+\n", out)
    assert asb.get("/version").json()["asbVersion"] == out.split("\n")[0].split(" v")[1]
    out = ok(asb, "version", "--client", env={"PATH": os.environ.get("PATH", "")})
    assert out.startswith("Client Version: v") and "Server" not in out
    both = json.loads(ok(asb, "version", "-o", "json"))
    assert both["serverVersion"]["major"] == "1" and both["clientVersion"]["asbVersion"]


def test_completion_scripts(asb, tmp_path):
    bash = ok(asb, "completion", "bash")
    assert subprocess.run(["bash", "-n"], input=bash, text=True).returncode == 0
    for verb in ("get", "describe", "version", "completion", "mcp"):
        assert re.search(rf'_asb_verbs="[^"]*\b{verb}\b', bash)
    assert "complete -F _asb_complete asb" in bash
    zsh = ok(asb, "completion", "zsh")
    assert zsh.startswith("#compdef asb\n") and "bashcompinit" in zsh
    # The completion function offers kinds, then the server's object names.
    asb.create_sandbox("compl-one")
    script = tmp_path / "c.sh"
    script.write_text(bash + f'''
asb() {{ "{asb_binary()}" "$@"; }}
COMP_WORDS=(asb get sa); COMP_CWORD=2; _asb_complete; echo "${{COMPREPLY[*]}}"
COMP_WORDS=(asb describe sbx compl); COMP_CWORD=3; _asb_complete; echo "${{COMPREPLY[*]}}"
''')
    p = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=cli_env(asb))
    assert p.returncode == 0, p.stderr
    kinds, names = p.stdout.splitlines()
    assert "sandboxes" in kinds.split() and "sandboxclaims" in kinds.split()
    assert names == "compl-one"
    p = run(asb, "completion", "fish")
    assert p.returncode == 2


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def parse_metrics(text):
    """Prometheus text format 0.0.4: {(name, labels-string): value}, checking HELP/TYPE order."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ")
            assert typ in ("counter", "gauge", "histogram"), line
            types[name] = typ
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.groups()
        base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        assert base in types, f"{name} without # TYPE"
        samples[(name, labels or "")] = float(value)
    return samples, types


def test_metrics_endpoint(asb):
    r = requests.get(asb.url + "/metrics", timeout=10)
    assert r.status_code == 401
    r = requests.get(asb.url + "/metrics", headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert r.status_code == 401
    pool_and_claim(asb, replicas=2)
    asb.create_sandbox("gone")
    asb.merge_patch(asb.path(CORE, "sandboxes", name="gone"), {"metadata": {"finalizers": ["x/y"]}})
    asb.delete(asb.path(CORE, "sandboxes", name="gone"))
    r = asb.get("/metrics")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples, types = parse_metrics(r.text)
    assert types["asb_claim_ready_seconds"] == "histogram"
    assert types["asb_reconcile_duration_seconds"] == "histogram"
    assert types["asb_reconcile_errors_total"] == "counter"
    assert types["asb_router_requests_total"] == "counter"
    assert types["asb_dns_queries_total"] == "counter"
    assert samples[("asb_warmpool_desired_replicas", '{namespace="default",warmpool="p1"}')] == 2
    assert samples[("asb_warmpool_ready_replicas", '{namespace="default",warmpool="p1"}')] == 0
    assert samples[("asb_sandboxes", '{phase="Pending"}')] == 3  # 2 members + the cold one
    assert samples[("asb_sandboxes", '{phase="Stopped"}')] == 1  # being deleted (libasb's phase)
    assert samples[("asb_sandboxes", '{phase="FinishedGone"}')] == 0
    assert samples[("asb_sandboxes", '{phase="Ready"}')] == 0
    count = samples[("asb_reconcile_duration_seconds_count", '{controller="claims"}')]
    inf = samples[("asb_reconcile_duration_seconds_bucket", '{controller="claims",le="+Inf"}')]
    assert count >= 1 and inf == count
    assert samples[("asb_reconcile_errors_total", '{controller="claims"}')] == 0
    # Every write above was made durable by a group commit's fdatasync of the WAL.
    assert types["asb_store_wal_sync_duration_seconds"] == "histogram"
    syncs = samples[("asb_store_wal_sync_duration_seconds_count", "")]
    assert syncs >= 1
    assert samples[("asb_store_wal_sync_duration_seconds_bucket", '{le="+Inf"}')] == syncs
    assert samples[("asb_store_wal_sync_duration_seconds_bucket", '{le="300"}')] == syncs
    asb.merge_patch(asb.path(CORE, "sandboxes", name="gone"), {"metadata": {"finalizers": None}})
    assert asb.post("/metrics", {}).status_code == 405


def router_counts(asb):
    """({code label: count}, requests with a latency, all samples) of the router's metrics."""
    samples, types = parse_metrics(asb.get("/metrics").text)
    assert types["asb_router_requests_total"] == "counter"
    assert types["asb_router_request_duration_seconds"] == "histogram"
    codes = {k[1]: v for k, v in samples.items() if k[0] == "asb_router_requests_total"}
    return codes, samples[("asb_router_request_duration_seconds_count", "")], samples


def test_metrics_router_requests_by_code_and_latency(asb):
    """The router's answers are counted by code with their latency, on the epoll loop (HTTP/1.1)
    and on the HTTP/2 path, from the same process-wide counters /metrics reads."""
    import grpc
    from grpc_helpers import Client
    router = open(os.path.join(asb.state_dir, "router")).read().strip()
    codes0, count0, _ = router_counts(asb)
    auth = {"Authorization": f"Bearer {asb.token}"}
    with requests.Session() as s:  # one kept-alive connection: the loop answers all of them
        for _ in range(3):
            assert s.get(router + "/v1/files/", timeout=10).status_code == 401
        assert s.get(router + "/v1/files/", headers={**auth, "X-Sandbox-ID": "ghost"},
                     timeout=10).status_code == 404
        assert s.get(router + "/healthz", timeout=10).status_code == 200
    g = Client(router[len("http://"):].rstrip("/"))
    try:  # HTTP/2: gRPC's errors are trailers-only answers with :status 200
        try:
            g.execute(["true"], metadata=[("x-sandbox-id", "ghost"),
                                          ("authorization", f"Bearer {asb.token}")])
            raise AssertionError("a ghost sandbox executed")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND, e
    finally:
        g.close()
    codes, count, samples = router_counts(asb)
    for code, n in (("401", 3), ("404", 1), ("200", 2)):  # 200: /healthz and the gRPC answer
        label = f'{{code="{code}"}}'
        assert codes.get(label, 0) - codes0.get(label, 0) == n, (code, codes0, codes)
    assert count - count0 == 6, (count0, count)
    assert samples[("asb_router_request_duration_seconds_bucket", '{le="+Inf"}')] == count
    assert samples[("asb_router_request_duration_seconds_sum", "")] > 0
    buckets = sorted((float(k[1][5:-2]), v) for k, v in samples.items()
                     if k[0] == "asb_router_request_duration_seconds_bucket" and "Inf" not in k[1])
    assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), buckets  # cumulative


def test_claim_progress_on_a_terminal_only(asb):
    """Without a runtime the claim never gets Ready: on a terminal `asb claim` says what it waits
    for; with stdout a pipe it stays silent (only the timeout error)."""
    import pty
    create(asb, "sandboxtemplates", EXT, template("t1"))
    create(asb, "sandboxwarmpools", EXT, pool("p1", "t1", 1))
    p = run(asb, "claim", "--pool", "p1", "--name", "quiet", "--timeout", "2s")
    assert p.returncode == 1 and p.stdout == "" and "waiting for Ready" not in p.stderr, p.stderr
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([asb_binary(), "claim", "--pool", "p1", "--name", "loud",
                               "--timeout", "2s"], stdout=slave, stderr=subprocess.PIPE,
                              text=True, env=cli_env(asb), timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    assert proc.returncode == 1, proc.stderr
    assert re.search(r"^claim loud: waiting for Ready \(Ready=False \w+: .+\)$", proc.stderr, re.M), \
        proc.stderr


def test_get_events_watch_for_one_object(asb):
    create(asb, "sandboxtemplates", EXT, template("t1"))
    proc = subprocess.Popen([asb_binary(), "get", "events", "-w", "--for", "swp/p2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(asb))
    try:
        time.sleep(0.5)  # the list (empty) is taken, the watch runs
        create(asb, "sandboxwarmpools", EXT, pool("p1", "t1", 1))
        create(asb, "sandboxwarmpools", EXT, pool("p2", "t1", 1))
        head = proc.stdout.readline()  # nothing was listed: the header comes with the first row
        assert head.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], head
        line = proc.stdout.readline()
        assert "sandboxwarmpool/p2" in line and "SuccessfulCreate" in line, line
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "sandboxwarmpool/p1" not in out
    assert "No resources found in default namespace." in err
