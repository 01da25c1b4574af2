"""`asb label` and `asb annotate` against a real `asb serve`: kubectl's words, the --overwrite rule,
KEY- removal, several objects, --all and -l, and what the server stores."""
from asb_apiserver import CORE, asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import ok, run

REF = "sandbox.agents.x-k8s.io/{}"


def stored(asb, name, field="labels"):
    r = asb.get(asb.path(CORE, "sandboxes", name=name))
    assert r.status_code == 200, r.text
    return r.json()["metadata"].get(field, {})


def test_label_set_overwrite_remove(asb):
    asb.create_sandbox("l1", labels={"app": "web"})
    assert ok(asb, "label", "sandbox", "l1", "tier=db") == REF.format("l1") + " labeled\n"
    assert stored(asb, "l1") == {"app": "web", "tier": "db"}
    # A key with a value is refused without --overwrite, whatever the new value, as kubectl.
    for value in ("x", "db"):
        p = run(asb, "label", "sandbox", "l1", f"tier={value}")
        assert (p.returncode, p.stdout) == (1, "")
        assert p.stderr == "error: 'tier' already has a value (db), and --overwrite is false\n"
    assert ok(asb, "label", "sbx/l1", "tier=x", "--overwrite") == REF.format("l1") + " labeled\n"
    assert ok(asb, "label", "sbx/l1", "tier=x", "--overwrite") == REF.format("l1") + " not labeled\n"
    assert stored(asb, "l1")["tier"] == "x"
    assert ok(asb, "label", "sandbox", "l1", "tier-") == REF.format("l1") + " unlabeled\n"
    assert stored(asb, "l1") == {"app": "web"}
    assert ok(asb, "label", "sandbox", "l1", "tier-") == ('label "tier" not found.\n'
                                                          + REF.format("l1") + " not labeled\n")
    p = run(asb, "label", "sandbox", "l1", "x=1", "x-")
    assert (p.returncode, p.stderr) == (1, "error: can not both modify and remove a label in the "
                                           "same command\n")
    p = run(asb, "label", "sandbox", "l1")
    assert (p.returncode, p.stderr) == (1, "error: at least one label update is required\n")
    p = run(asb, "label", "sandbox", "l1", "k=v=w")
    assert (p.returncode, p.stderr) == (1, "error: invalid label spec: k=v=w\n")
    assert ok(asb, "label", "sandbox", "l1", "o=1", "-o", "name") == REF.format("l1") + "\n"
    # A value kubectl refuses before sending; a key the server refuses (its Invalid error).
    p = run(asb, "label", "sandbox", "l1", "bad=a b")
    assert p.returncode == 1 and p.stderr.startswith(
        'error: invalid label value: "bad=a b": a valid label must be an empty string'), p.stderr
    p = run(asb, "label", "sandbox", "l1", "bad=" + "x" * 64)
    assert p.stderr.endswith(": must be no more than 63 characters\n"), p.stderr
    p = run(asb, "label", "sandbox", "l1", "bad key=1")
    assert p.returncode == 1 and p.stderr.startswith("Error from server (Invalid): "), p.stderr
    assert "bad" not in stored(asb, "l1") and "bad key" not in stored(asb, "l1")


def test_label_several_objects_all_and_selector(asb):
    for n, app in (("m1", "web"), ("m2", "web"), ("m3", "db")):
        asb.create_sandbox(n, labels={"app": app})
    assert ok(asb, "label", "sandbox", "m1", "m2", "a=1") == "".join(
        REF.format(n) + " labeled\n" for n in ("m1", "m2"))
    assert ok(asb, "label", "sandbox/m2", "sandbox/m3", "b=2") == "".join(
        REF.format(n) + " labeled\n" for n in ("m2", "m3"))
    assert ok(asb, "label", "sandbox", "-l", "app=web", "c=3") == "".join(
        REF.format(n) + " labeled\n" for n in ("m1", "m2"))
    assert "c" not in stored(asb, "m3")
    assert ok(asb, "label", "sandboxes", "--all", "d=4") == "".join(
        REF.format(n) + " labeled\n" for n in ("m1", "m2", "m3"))
    assert ok(asb, "label", "sandbox", "-l", "app=none", "e=5") == ""
    assert stored(asb, "m1") == {"app": "web", "a": "1", "c": "3", "d": "4"}
    assert stored(asb, "m3") == {"app": "db", "b": "2", "d": "4"}
    # A missing object fails; the others are still labeled; exit 1.
    p = run(asb, "label", "sandbox", "nope", "m1", "f=6")
    assert p.returncode == 1
    assert p.stderr == 'Error from server (NotFound): sandboxes.agents.x-k8s.io "nope" not found\n'
    assert p.stdout == REF.format("m1") + " labeled\n" and stored(asb, "m1")["f"] == "6"
    for args, err in ((["sandbox", "--all", "-l", "a=1", "g=1"],
                       "error: cannot set --all and --selector at the same time\n"),
                      (["sandbox", "m1", "-l", "a=1", "g=1"],
                       "error: name cannot be provided when a selector is specified\n"),
                      (["sandbox", "g=1"], "error: resource(s) were provided, but no name was "
                                           "specified\n"),
                      (["widgets", "x", "g=1"], 'error: the server doesn\'t have a resource type '
                                                '"widgets"\n')):
        p = run(asb, "label", *args)
        assert (p.returncode, p.stderr) == (1, err), args


def test_annotate(asb):
    asb.create_sandbox("n1")
    assert ok(asb, "annotate", "sandbox", "n1", "note=hi", "k=v=w") == REF.format("n1") + " annotated\n"
    assert stored(asb, "n1", "annotations") == {"note": "hi", "k": "v=w"}
    p = run(asb, "annotate", "sandbox", "n1", "note=ho", "k=1")
    assert p.returncode == 1
    assert p.stderr == ("error: --overwrite is false but found the following declared "
                        "annotation(s): 'note' already has a value (hi); 'k' already has a value "
                        "(v=w)\n")
    assert ok(asb, "annotate", "sandbox", "n1", "note=ho", "--overwrite") == REF.format("n1") + " annotated\n"
    assert ok(asb, "annotate", "sandbox", "n1", "k-", "gone-") == REF.format("n1") + " annotated\n"
    assert stored(asb, "n1", "annotations") == {"note": "ho"}
    p = run(asb, "annotate", "sandbox", "n1", "x=1", "x-")
    assert (p.returncode, p.stderr) == (1, "error: can not both modify and remove the following "
                                           "annotation(s) in the same command: x\n")
    p = run(asb, "annotate", "sandbox", "n1", "note=1", "--overwrite", "--resource-version", "1")
    assert p.returncode == 1 and p.stderr.startswith("Error from server (Conflict): "), p.stderr
    assert stored(asb, "n1", "annotations") == {"note": "ho"}
