"""Every verb of `asb` answers an unknown or incomplete flag with kubectl's one line and exit 1
(issue 32), not its usage text."""
import re

from asb_apiserver import asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import ok, run


def verbs(asb):
    text = ok(asb, "--help")
    block = text.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines()]


def test_unknown_flag_is_one_line_for_every_verb(asb):
    names = verbs(asb)
    assert {"get", "label", "annotate", "patch", "edit", "scale", "create", "replace",
            "api-resources", "wait", "exec", "snapshot"} <= set(names), names
    for verb in names:
        if verb == "serve":  # asb-server's own flags (docs/api-server.md)
            continue
        args = [verb, "create"] if verb == "snapshot" else [verb]
        p = run(asb, *args, "--no-such-flag=1")
        sub = " create" if verb == "snapshot" else ""
        assert (p.returncode, p.stdout, p.stderr) == (
            1, "", f"error: unknown flag: --no-such-flag\nSee 'asb {verb}{sub} --help' for usage.\n"), verb


def test_flag_error_shapes(asb):
    for args, err in ((["get", "-Z", "sbx"], "error: unknown shorthand flag: 'Z' in -Z\n"),
                      (["get", "sbx", "-l"], "error: flag needs an argument: 'l' in -l\n"),
                      (["get", "sbx", "--selector"], "error: flag needs an argument: --selector\n"),
                      (["label", "--overwritten"], "error: unknown flag: --overwritten\n")):
        p = run(asb, *args)
        verb = args[0]
        assert (p.returncode, p.stderr) == (1, err + f"See 'asb {verb} --help' for usage.\n"), args
    # --help still prints the usage, exit 0.
    for verb in ("label", "annotate", "patch", "edit", "scale", "create", "replace", "api-resources"):
        assert re.match(rf"Usage: asb {verb} ", ok(asb, verb, "--help")), verb
