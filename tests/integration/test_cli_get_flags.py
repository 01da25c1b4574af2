"""`asb get` flags kubectl users type (issue 32): --show-labels, -L, --no-headers, --sort-by,
comma-separated kinds and `all`, events sorted and folded, -w with --output-watch-events; and
`asb describe`'s folded events. Against a real `asb serve` with ASB_RUNTIME=none (objects are
stored and the controllers run; no sandbox starts)."""
import re
import subprocess
import time

from asb_apiserver import CORE, EXT, V, asb, asb_binary, sandbox, start_asb  # noqa: F401 (fixtures)
from asb_cli import cli_env, ok, run
from waiting import wait_for

EVENTS = "/apis/events.k8s.io/v1"


def create(asb, plural, group, body):
    r = asb.post(asb.path(group, plural, "default"), body)
    assert r.status_code == 201, r.text


def template(name, labels=None):
    return {"apiVersion": f"{EXT}/{V}", "kind": "SandboxTemplate",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}}


def three_templates(asb):
    create(asb, "sandboxtemplates", EXT, template("b", {"tier": "gold", "app.kubernetes.io/name": "x"}))
    create(asb, "sandboxtemplates", EXT, template("c", {"tier": "iron"}))
    create(asb, "sandboxtemplates", EXT, template("a"))


def test_show_labels_and_label_columns(asb):
    three_templates(asb)
    lines = ok(asb, "get", "templates", "--show-labels", "-L", "tier",
               "-L", "app.kubernetes.io/name,missing").splitlines()
    assert lines[0].split() == ["NAME", "AGE", "TIER", "NAME", "MISSING", "LABELS"]
    rows = {line.split()[0]: line for line in lines[1:]}
    # kubectl: an absent label is an empty cell; LABELS sorted k=v, joined by commas
    b = rows["b"].split()
    assert b[2:5] == ["gold", "x", "agents.x-k8s.io/sandbox-template-ref-hash=" + b[4].split("=")[-1]] \
        or b[2:4] == ["gold", "x"], rows["b"]
    assert rows["b"].rstrip().endswith("app.kubernetes.io/name=x,tier=gold"), rows["b"]
    assert rows["c"].split()[2] == "iron"
    # columns stay in place: TIER of every row starts under its header
    col = lines[0].index("TIER")
    assert rows["b"][col:col + 4] == "gold" and rows["c"][col:col + 4] == "iron"
    assert rows["a"][col:col + 4] == "    "


def test_no_headers_and_sort_by(asb):
    three_templates(asb)
    out = ok(asb, "get", "templates", "--no-headers", "--sort-by", ".metadata.name")
    assert [line.split()[0] for line in out.splitlines()] == ["a", "b", "c"]
    out = ok(asb, "get", "templates", "--no-headers", "--sort-by={.metadata.labels.tier}",
             "-o", "name")
    # objects without the field first, then gold, iron
    assert out.splitlines() == [f"sandboxtemplate.{EXT}/{n}" for n in ("a", "b", "c")]
    js = ok(asb, "get", "templates", "--sort-by", "{.metadata.name}", "-o",
            "jsonpath={.items[*].metadata.name}")
    assert js == "a b c"
    p = run(asb, "get", "templates", "--sort-by", ".spec.nope")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == ('error: couldn\'t find any field with path "{.spec.nope}" '
                        'in the list of objects\n')


def test_several_kinds_and_all(asb):
    create(asb, "sandboxes", CORE, sandbox(name="s1"))
    create(asb, "sandboxtemplates", EXT, template("t1"))
    out = ok(asb, "get", "sandboxes,sandboxtemplates")
    tables = out.split("\n\n")
    assert len(tables) == 2, out
    assert tables[0].splitlines()[0].split()[0] == "NAME"
    assert tables[0].splitlines()[1].split()[0] == "sandbox.agents.x-k8s.io/s1"
    assert tables[1].splitlines()[1].split()[0] == f"sandboxtemplate.{EXT}/t1"
    # `all`: every kind of ours that has objects, the same way; empty kinds print nothing
    out = ok(asb, "get", "all")
    assert "sandbox.agents.x-k8s.io/s1" in out and f"sandboxtemplate.{EXT}/t1" in out
    assert out.count("\n\n") == 1 and "sandboxclaim" not in out
    names = ok(asb, "get", "sbx,template", "-o", "name").split()
    assert names == ["sandbox.agents.x-k8s.io/s1", f"sandboxtemplate.{EXT}/t1"]
    import json
    items = json.loads(ok(asb, "get", "all", "-o", "json"))["items"]
    assert sorted(i["kind"] for i in items) == ["Sandbox", "SandboxTemplate"]
    p = run(asb, "get", "sbx,nope")
    assert p.returncode == 2 and 'resource type "nope"' in p.stderr
    p = run(asb, "get", "claims,warmpools")
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr == "No resources found in default namespace.\n"
    p = run(asb, "get", "sbx,templates", "-w")
    assert p.returncode == 2 and "watch is only supported" in p.stderr


def test_events_sorted_and_folded(asb):
    # A pool whose template is missing says so once each time it becomes so: twice here, the same
    # event about the same object, which kubectl shows as one row "(x2 over ...)".
    create(asb, "sandboxwarmpools", EXT,
           {"apiVersion": f"{EXT}/{V}", "kind": "SandboxWarmPool", "metadata": {"name": "p1"},
            "spec": {"replicas": 0, "sandboxTemplateRef": {"name": "t9"}}})

    def not_found_events():
        r = asb.get(f"{EVENTS}/namespaces/default/events")
        return [e for e in r.json()["items"] if e["reason"] == "TemplateNotFound"]
    wait_for(lambda: len(not_found_events()) == 1, timeout=20, what="first TemplateNotFound")
    create(asb, "sandboxtemplates", EXT, template("t9"))
    wait_for(lambda: asb.get(asb.path(EXT, "sandboxwarmpools", "default", "p1")).json()
             .get("status", {}).get("conditions", [{}])[0].get("reason") != "TemplateNotFound",
             timeout=20, what="pool sees its template")
    assert asb.delete(asb.path(EXT, "sandboxtemplates", "default", "t9")).status_code == 200
    wait_for(lambda: len(not_found_events()) == 2, timeout=20, what="second TemplateNotFound")
    lines = ok(asb, "get", "events").splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    mine = [line for line in lines if "TemplateNotFound" in line]
    assert len(mine) == 1, lines
    assert re.match(r"^\d+s \(x2 over \d+s\)\s+Warning\s+TemplateNotFound\s+sandboxwarmpool/p1\s",
                    mine[0]), mine[0]
    # the folded row is the newest: last in time order
    assert lines[-1] == mine[0]
    wide = ok(asb, "get", "events", "-o", "wide").splitlines()
    assert wide[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "SOURCE", "MESSAGE",
                               "FIRST", "SEEN", "COUNT", "NAME"]
    row = [line for line in wide if "TemplateNotFound" in line][0]
    assert row.split()[-2] == "2", row
    # --sort-by sorts the folded rows
    rows = ok(asb, "get", "events", "--sort-by", ".reason", "--no-headers").splitlines()
    reasons = [re.split(r"\s{2,}", r)[2] for r in rows]
    assert reasons == sorted(reasons) and reasons.count("TemplateNotFound") == 1, rows
    # json keeps every Event as stored
    import json
    evs = json.loads(ok(asb, "get", "events", "-o", "json"))["items"]
    assert len([e for e in evs if e["reason"] == "TemplateNotFound"]) == 2
    # describe folds them too
    out = ok(asb, "describe", "warmpool", "p1")
    ev = re.findall(r"^  Warning\s+TemplateNotFound\s+(\d+s \(x2 over \d+s\))\s", out, re.M)
    assert len(ev) == 1, out


def test_watch_events_column_and_alignment(asb):
    create(asb, "sandboxtemplates", EXT, template("t1"))
    proc = subprocess.Popen([asb_binary(), "get", "templates", "-w", "--output-watch-events"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cli_env(asb))
    try:
        head = proc.stdout.readline()
        assert head.split() == ["EVENT", "NAME", "AGE"], head
        first = proc.stdout.readline()
        assert first.split()[:2] == ["ADDED", "t1"], first
        create(asb, "sandboxtemplates", EXT, template("t2"))
        added = proc.stdout.readline()
        assert added.split()[:2] == ["ADDED", "t2"], added
        assert asb.delete(asb.path(EXT, "sandboxtemplates", "default", "t2")).status_code == 200
        line = proc.stdout.readline()
        while line.split()[0] == "MODIFIED":
            line = proc.stdout.readline()
        assert line.split()[:2] == ["DELETED", "t2"], line
        # every row's NAME and AGE start under their headers
        for row in (first, added, line):
            assert row.index(row.split()[1]) == head.index("NAME"), (head, row)
            assert row.index(row.split()[2], head.index("NAME") + 2) == head.index("AGE"), (head, row)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    p = run(asb, "get", "templates", "--output-watch-events")
    assert p.returncode == 2 and "-w" in p.stderr
