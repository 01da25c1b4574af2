"""`asb top sandboxes` (issue 32): kubectl top pod's columns from each running sandbox's cgroups as
asb serve reads them (the PodMetrics of /apis/metrics.k8s.io/v1beta1), the same figures in
`asb describe` and asb serve's /metrics. Against a real `asb serve` running runc sandboxes
(skipped without root or runc)."""
import re
import time

from asb_cli import ok, run
from local_sandbox import create, get_sandbox, sbx_state, start_sbx, wait_ready  # noqa: F401

BUSY = "python3 -c 'b = bytearray(48 << 20)\nwhile True: pass'"


def test_top_describe_and_metrics(start_sbx):
    asb = start_sbx()
    create(asb, "busy", container={"command": ["sh", "-c", BUSY]})
    create(asb, "idle")
    wait_ready(asb, "busy", timeout=20)
    wait_ready(asb, "idle", timeout=20)
    time.sleep(0.5)  # the busy loop has its memory
    lines = ok(asb, "top", "sandboxes").splitlines()
    assert lines[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert set(rows) == {"busy", "idle"}, lines
    cpu, mem = rows["busy"]
    assert re.fullmatch(r"\d+m", cpu) and re.fullmatch(r"\d+Mi", mem), rows
    assert int(cpu[:-1]) >= 100, rows  # a busy loop (on a shared machine: at least a tenth of a core)
    assert int(mem[:-2]) >= 40, rows
    assert int(rows["idle"][0][:-1]) < int(cpu[:-1])
    # one by name, across namespaces, without headers
    one = ok(asb, "top", "sbx", "busy", "--no-headers").split()
    assert one[0] == "busy" and len(one) == 3
    assert ok(asb, "top", "sandbox", "-A").splitlines()[0].split()[0] == "NAMESPACE"
    p = run(asb, "top", "sandboxes", "nope")
    assert p.returncode == 1 and "metrics not available" in p.stderr, p.stderr
    p = run(asb, "top", "claims")
    assert p.returncode == 2 and "sandboxes" in p.stderr
    # describe shows them
    out = ok(asb, "describe", "sandbox", "busy")
    assert re.search(r"^Usage:\s+cpu=\d+m, memory=\d+Mi$", out, re.M), out
    # /metrics: CPU seconds and working set per sandbox
    text = asb.session.get(asb.url + "/metrics").text
    uid = get_sandbox(asb, "busy")["metadata"]["uid"]
    assert uid
    cpu_s = re.search(r'^asb_sandbox_cpu_usage_seconds_total\{namespace="default",name="busy"\} '
                      r'([0-9.]+)$', text, re.M)
    mem_b = re.search(r'^asb_sandbox_memory_working_set_bytes\{namespace="default",name="busy"\} '
                      r'(\d+)$', text, re.M)
    assert cpu_s and float(cpu_s.group(1)) > 0.1, text
    assert mem_b and int(mem_b.group(1)) >= 40 << 20, text
