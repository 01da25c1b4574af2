"""`asb create -f` and `asb replace -f` against a real `asb serve`: AlreadyExists and NotFound are
errors (unlike apply), replace is a PUT of the whole object (with or without a resourceVersion),
and `asb api-resources` from the server's discovery."""
from asb_apiserver import CORE, asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import SANDBOX_YAML, TEMPLATE_YAML, ok, run

REF = "sandbox.agents.x-k8s.io/{}"


def test_create(asb, tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text(TEMPLATE_YAML.format(name="t1") + "---\n" + SANDBOX_YAML.format(name="c1", app="web"))
    assert ok(asb, "create", "-f", str(f)) == ("sandboxtemplate.extensions.agents.x-k8s.io/t1 created\n"
                                               + REF.format("c1") + " created\n")
    assert asb.get(asb.path(CORE, "sandboxes", name="c1")).json()["metadata"]["labels"] == {"app": "web"}
    p = run(asb, "create", "-f", str(f))
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == (f'Error from server (AlreadyExists): error when creating "{f}": '
                        'sandboxtemplates.extensions.agents.x-k8s.io "t1" already exists\n'
                        f'Error from server (AlreadyExists): error when creating "{f}": '
                        'sandboxes.agents.x-k8s.io "c1" already exists\n')
    assert ok(asb, "create", "-f", "-", "-o", "name",
              input=SANDBOX_YAML.format(name="c2", app="x")) == REF.format("c2") + "\n"
    for args, err in ((["create"], "error: must specify one of -f and -k\n"),
                      (["create", "-f", str(tmp_path / "nope")],
                       f'error: the path "{tmp_path / "nope"}" cannot be read: No such file or directory\n')):
        p = run(asb, *args)
        assert (p.returncode, p.stderr) == (1, err), args


def test_replace(asb, tmp_path):
    asb.create_sandbox("r1", labels={"app": "web"})
    # Without a resourceVersion: replaces what is stored (as kubectl replace).
    p = ok(asb, "replace", "-f", "-", input=SANDBOX_YAML.format(name="r1", app="db"))
    assert p == REF.format("r1") + " replaced\n"
    obj = asb.get(asb.path(CORE, "sandboxes", name="r1")).json()
    assert obj["metadata"]["labels"] == {"app": "db"}
    # With a stale one: Conflict.
    stale = SANDBOX_YAML.format(name="r1", app="x").replace(
        "  name: r1\n", '  name: r1\n  resourceVersion: "1"\n')
    p = run(asb, "replace", "-f", "-", input=stale)
    assert p.returncode == 1 and p.stderr.startswith(
        'Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled'), p.stderr
    p = run(asb, "replace", "-f", "-", input=SANDBOX_YAML.format(name="zz", app="x"))
    assert (p.returncode, p.stderr) == (1, 'Error from server (NotFound): error when replacing "STDIN": '
                                           'sandboxes.agents.x-k8s.io "zz" not found\n')
    assert asb.get(asb.path(CORE, "sandboxes", name="zz")).status_code == 404
    assert asb.get(asb.path(CORE, "sandboxes", name="r1")).json()["metadata"]["labels"] == {"app": "db"}


HEAD = "NAME               SHORTNAMES        APIVERSION                           NAMESPACED   KIND"
ROWS = [("sandboxes", "sandbox", "agents.x-k8s.io/v1beta1", "Sandbox"),
        ("events", "ev", "events.k8s.io/v1", "Event"),
        ("sandboxclaims", "sandboxclaim", "extensions.agents.x-k8s.io/v1beta1", "SandboxClaim"),
        ("sandboxsnapshots", "ssnap", "extensions.agents.x-k8s.io/v1beta1", "SandboxSnapshot"),
        ("sandboxtemplates", "sandboxtemplate", "extensions.agents.x-k8s.io/v1beta1", "SandboxTemplate"),
        ("sandboxwarmpools", "swp", "extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool")]


def test_api_resources(asb):
    """The columns and order kubectl prints for the same discovery documents."""
    table = ok(asb, "api-resources").splitlines()
    assert table[0] == HEAD
    assert table[1:] == [f"{n:<19}{s:<18}{v:<37}true         {k}" for n, s, v, k in ROWS]
    assert ok(asb, "api-resources", "--no-headers").splitlines() == [
        f"{n:<19}{s:<18}{v:<37}true   {k}" for n, s, v, k in ROWS]
    wide = ok(asb, "api-resources", "-o", "wide").splitlines()
    assert wide[0].split() == HEAD.split() + ["VERBS", "CATEGORIES"]
    assert wide[1].split()[-1] == "create,delete,deletecollection,get,list,patch,update,watch"
    assert wide[2].split()[-1] == "delete,deletecollection,get,list,watch"
    assert ok(asb, "api-resources", "-o", "name").splitlines() == [
        f"{n}.{v.split('/')[0]}" for n, _, v, _ in ROWS]
    assert ok(asb, "api-resources", "-o", "name", "--api-group", "events.k8s.io") == "events.events.k8s.io\n"
    assert ok(asb, "api-resources", "-o", "name", "--verbs", "create,patch",
              "--sort-by", "kind").splitlines()[0] == "sandboxes.agents.x-k8s.io"
    assert ok(asb, "api-resources", "--namespaced=false", "--no-headers") == ""
