"""`asb edit` against a real `asb serve`, with scripted editors: a saved change is patched, no
change cancels, a refused save re-opens the file with the error at the top, $KUBE_EDITOR before
$EDITOR, -o json."""
import os
import shlex
import stat

from asb_apiserver import CORE, asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import cli_env, run

HEADER = ("# Please edit the object below. Lines beginning with a '#' will be ignored,\n"
          "# and an empty file will abort the edit. If an error occurs while saving this file will be\n"
          "# reopened with the relevant failures.\n#\n")


def editor(tmp_path, name, steps):
    """An editor script: on its Nth run it copies the file it got to seen-N, then runs steps[N]
    (a sed expression, or "" to save unchanged)."""
    path = tmp_path / name
    cases = "".join("%d) %s ;;\n" % (i, "sed -i %s \"$1\"" % shlex.quote(s) if s else ":")
                    for i, s in enumerate(steps))
    path.write_text(f"""#!/bin/sh
n=$(ls {tmp_path}/seen-* 2>/dev/null | wc -l)
cp "$1" {tmp_path}/seen-$n
case $n in
{cases}esac
""")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def edit(asb, tmp_path, ed, *args, var="KUBE_EDITOR"):
    for f in tmp_path.glob("seen-*"):
        f.unlink()
    env = cli_env(asb, TMPDIR=str(tmp_path / "tmp"))
    env.pop("KUBE_EDITOR", None)
    env.pop("EDITOR", None)
    env[var] = ed
    return run(asb, "edit", *args, env=env)


def labels(asb, name):
    return asb.get(asb.path(CORE, "sandboxes", name=name)).json()["metadata"].get("labels")


def test_edit(asb, tmp_path):
    (tmp_path / "tmp").mkdir()
    asb.create_sandbox("e1", labels={"app": "web"})
    p = edit(asb, tmp_path, editor(tmp_path, "none", [""]), "sandbox", "e1")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "Edit cancelled, no changes made.\n")
    seen = (tmp_path / "seen-0").read_text()
    assert seen.startswith(HEADER + "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\n"), seen
    p = edit(asb, tmp_path, editor(tmp_path, "lbl", ["s/app: web/app: edited/"]), "sbx/e1")
    assert (p.returncode, p.stdout) == (0, "sandbox.agents.x-k8s.io/e1 edited\n"), p.stderr
    assert labels(asb, "e1") == {"app": "edited"}
    # $EDITOR when $KUBE_EDITOR is not set; an editor with arguments goes through the shell.
    ed = editor(tmp_path, "ed2", ["s/app: edited/app: again/"])
    p = edit(asb, tmp_path, f"sh {ed}", "sandbox", "e1", var="EDITOR")
    assert p.returncode == 0 and labels(asb, "e1") == {"app": "again"}, p.stderr
    # Refused by the server: re-opened with the reason on top; fixed on the second save.
    ed = editor(tmp_path, "fix", ["s/app: again/app: \"bad value\"/", "s/app: \"bad value\"/app: fixed/"])
    p = edit(asb, tmp_path, ed, "sandbox", "e1")
    assert p.returncode == 0 and p.stdout == "sandbox.agents.x-k8s.io/e1 edited\n"
    assert p.stderr == 'error: sandboxes.agents.x-k8s.io "e1" is invalid\n'
    second = (tmp_path / "seen-1").read_text()
    assert second.startswith(HEADER + '# sandboxes.agents.x-k8s.io "e1" was not valid:\n# * '), second
    assert 'Invalid value: "bad value"' in second and '    app: "bad value"\n' in second
    assert labels(asb, "e1") == {"app": "fixed"}
    # Saved unchanged after an error: cancelled, exit 1, the file kept where it says.
    ed = editor(tmp_path, "keep", ["s/app: fixed/app: \"bad value\"/", ""])
    p = edit(asb, tmp_path, ed, "sandbox", "e1")
    kept = list((tmp_path / "tmp").iterdir())
    assert p.returncode == 1 and len(kept) == 1 and kept[0].name.startswith("asb-edit-")
    assert p.stderr == ('error: sandboxes.agents.x-k8s.io "e1" is invalid\n'
                        f'A copy of your changes has been stored to "{kept[0]}"\n'
                        "error: Edit cancelled, no valid changes were saved.\n")
    kept[0].unlink()
    assert labels(asb, "e1") == {"app": "fixed"}
    # The name may not change.
    p = edit(asb, tmp_path, editor(tmp_path, "ren", ["s/^  name: e1$/  name: other/"]), "sandbox", "e1")
    assert p.returncode == 1 and p.stderr.endswith("error: At least one of apiVersion, kind and name was changed\n")
    for f in (tmp_path / "tmp").iterdir():
        f.unlink()
    # A file that does not parse: re-opened with kubectl's syntax-error header; emptied: cancelled.
    p = edit(asb, tmp_path, editor(tmp_path, "syn", ["$a x: [unclosed", "d"]), "sandbox", "e1")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "Edit cancelled, saved file was empty.\n")
    second = (tmp_path / "seen-1").read_text()
    assert second.startswith(HEADER + "# The edited file had a syntax error: "), second
    assert "\n#\napiVersion: " in second and second.endswith("x: [unclosed\n")
    # -o json; an editor that fails changes nothing.
    p = edit(asb, tmp_path, editor(tmp_path, "js", ['s/"app": "fixed"/"app": "json"/']), "sandbox", "e1", "-o", "json")
    assert p.returncode == 0 and labels(asb, "e1") == {"app": "json"}, p.stderr
    assert (tmp_path / "seen-0").read_text().startswith(HEADER + "{\n")
    p = edit(asb, tmp_path, "false", "sandbox", "e1")
    assert (p.returncode, p.stderr) == (1, 'error: there was a problem with the editor "false"\n')
    p = edit(asb, tmp_path, "true", "sandbox", "nope")
    assert (p.returncode, p.stderr) == (1, 'Error from server (NotFound): sandboxes.agents.x-k8s.io "nope" not found\n')
    assert list((tmp_path / "tmp").iterdir()) == []
    assert os.path.exists(tmp_path / "tmp")
