"""geminicli-toolbox invocation: argument sources, the output object, exit codes."""
import json

import pytest

from toolbox_helpers import call, err, ok, run_raw, toolbox_binary


def test_arguments_from_argv_stdin_and_file(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    args = {"file_path": "a.txt"}
    assert ok(tmp_path, "read_file", args, via="argv") == "alpha\n"
    assert ok(tmp_path, "read_file", args, via="stdin") == "alpha\n"
    (tmp_path / "args.json").write_text(json.dumps(args))
    p = run_raw(tmp_path, "read_file", "@" + str(tmp_path / "args.json"), via="argv")
    assert p.returncode == 0 and json.loads(p.stdout)["llmContent"] == "alpha\n"
    # without --root the workspace is $GEMINICLI_TOOLBOX_ROOT, else the current directory
    import subprocess
    p = subprocess.run([toolbox_binary(), "read_file", json.dumps(args)], capture_output=True,
                       text=True, cwd=str(tmp_path))
    assert json.loads(p.stdout)["llmContent"] == "alpha\n"
    p = subprocess.run([toolbox_binary(), "read_file", "-"], input=json.dumps(args),
                       capture_output=True, text=True, cwd="/",
                       env={"GEMINICLI_TOOLBOX_ROOT": str(tmp_path)})
    assert json.loads(p.stdout)["llmContent"] == "alpha\n"


def test_unknown_tool_is_a_toolbox_failure(tmp_path):
    p = run_raw(tmp_path, "search_file_content", {"pattern": "x"})
    assert p.returncode == 2 and p.stdout == ""
    assert 'Tool "search_file_content" not found in registry' in p.stderr


@pytest.mark.parametrize("text,needle", [("{", "not valid JSON"), ("[1]", "must be a JSON object"),
                                         ('"x"', "JSON"),
                                         ('{"a":1,"a":2}', "not valid JSON")])
def test_bad_json_is_a_toolbox_failure(tmp_path, text, needle):
    p = run_raw(tmp_path, "read_file", text)
    assert p.returncode == 2 and p.stdout == "" and needle in p.stderr


def test_usage_errors(tmp_path):
    p = run_raw(tmp_path, "read_file", "{}", extra=("--bogus",))
    assert p.returncode == 2 and "usage:" in p.stderr
    p = run_raw(tmp_path / "missing", "read_file", "{}", cwd=tmp_path)
    assert p.returncode == 2 and "workspace" in p.stderr
    p = run_raw(tmp_path, "read_file", "@" + str(tmp_path / "nope.json"))
    assert p.returncode == 2 and "nope.json" in p.stderr


@pytest.mark.parametrize("tool,args,msg", [
    ("read_file", {}, "params must have required property 'file_path'"),
    ("read_file", {"file_path": 3}, "params/file_path must be string"),
    ("read_file", {"file_path": "a", "start_line": 0}, "params/start_line must be >= 1"),
    ("read_file", {"file_path": "a", "end_line": "2"}, "params/end_line must be integer"),
    ("write_file", {"file_path": "a"}, "params must have required property 'content'"),
    ("replace", {"file_path": "a", "old_string": "x", "new_string": "y"},
     "params must have required property 'instruction'"),
    ("replace", {"file_path": "a", "instruction": "i", "old_string": "x", "new_string": "y",
                 "allow_multiple": "yes"}, "params/allow_multiple must be boolean"),
    ("run_shell_command", {"command": "   "}, "Command cannot be empty."),
    ("run_shell_command", {"command": "true", "delay_ms": -1}, "params/delay_ms must be >= 0"),
    ("list_directory", {}, "params must have required property 'dir_path'"),
    ("list_directory", {"dir_path": ".", "ignore": [1]}, "params/ignore/0 must be string"),
    ("glob", {"pattern": ""}, "The 'pattern' parameter cannot be empty."),
    ("grep_search", {"pattern": "x", "total_max_matches": 0}, "params/total_max_matches must be >= 1"),
    ("read_many_files", {"include": []}, "params/include must NOT have fewer than 1 items"),
    ("read_many_files", {"include": [""]}, "params/include/0 must NOT have fewer than 1 characters"),
    ("read_many_files", {"paths": ["a"]}, "params must have required property 'include'"),
])
def test_schema_errors_reach_the_model(tmp_path, tool, args, msg):
    text = err(tmp_path, tool, args, etype="invalid_tool_params")
    assert text == f"Error: Invalid parameters provided. Reason: {msg}"


def test_invalid_utf8_is_replaced(tmp_path):
    (tmp_path / "l1.txt").write_bytes(b"caf\xe9 ok\n")
    assert ok(tmp_path, "read_file", {"file_path": "l1.txt"}) == "caf\ufffd ok\n"


def test_help():
    import subprocess
    p = subprocess.run([toolbox_binary(), "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "grep_search" in p.stdout
