"""`asb completion bash`: every kind (snapshots too), and the names of live objects from the server
for the verbs that take them (issue 32)."""
import subprocess

from asb_apiserver import EXT, asb, asb_binary, start_asb  # noqa: F401 (fixtures)
from asb_cli import cli_env, ok


def complete(asb, tmp_path, *lines):
    """Runs the bash completion for each command line (the last word being completed)."""
    script = ok(asb, "completion", "bash") + f'asb() {{ "{asb_binary()}" "$@"; }}\n'
    for words in lines:
        quoted = " ".join(f'"{w}"' for w in words)
        script += (f'COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; COMPREPLY=(); '
                   '_asb_complete; echo "${COMPREPLY[*]}"\n')
    f = tmp_path / "c.sh"
    f.write_text(script)
    p = subprocess.run(["bash", str(f)], capture_output=True, text=True, env=cli_env(asb), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_completion_kinds_and_live_names(asb, tmp_path):
    asb.create_sandbox("box-one")
    asb.create_sandbox("box-two")
    asb.create_sandbox("box-three", ns="other")
    r = asb.post(asb.path(EXT, "sandboxtemplates"), {
        "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": "tpl"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}})
    assert r.status_code == 201, r.text
    out = complete(asb, tmp_path,
                   ["asb", "get", "sandboxsn"],
                   ["asb", "exec", "box"],
                   ["asb", "logs", ""],
                   ["asb", "-n", "other", "exec", ""],
                   ["asb", "label", "sbx/box-t"],
                   ["asb", "scale", ""],
                   ["asb", "edit", "template", ""],
                   ["asb", "cp", "box-o"],
                   ["asb", "snapshot", ""],
                   ["asb", "lab"])
    assert out == ["sandboxsnapshots", "box-one box-two", "box-one box-two", "box-three",
                   "sbx/box-two", "sandboxwarmpools swp", "tpl", "box-one:", "create ls rm",
                   "label"]
