"""geminicli-toolbox file tools: read_file, write_file, replace, list_directory (AGENT.md §2.2-2.5)."""
import os

import pytest

from toolbox_helpers import err, ok


def truncated(a, b, total, body):
    return ("\nIMPORTANT: The file content has been truncated.\n"
            f"Status: Showing lines {a}-{b} of {total} total lines.\n"
            "Action: To read more of the file, you can use the 'start_line' and 'end_line' "
            "parameters in a subsequent 'read_file' call. For example, to read the next section "
            f"of the file, use start_line: {b + 1}.\n\n--- FILE CONTENT (truncated) ---\n{body}")


# read_file

def test_read_whole_file_relative_and_absolute(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_text("one\ntwo\n")
    assert ok(tmp_path, "read_file", {"file_path": "d/f.txt"}) == "one\ntwo\n"
    assert ok(tmp_path, "read_file", {"file_path": str(tmp_path / "d" / "f.txt")}) == "one\ntwo\n"


def test_read_line_range_has_truncation_notice(tmp_path):
    (tmp_path / "f.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    # split on '\n' as gemini-cli does: a trailing newline counts as an 11th (empty) line
    out = ok(tmp_path, "read_file", {"file_path": "f.txt", "start_line": 3, "end_line": 5})
    assert out == truncated(3, 5, 11, "line3\nline4\nline5")
    out = ok(tmp_path, "read_file", {"file_path": "f.txt", "start_line": 9})
    assert out == truncated(9, 11, 11, "line9\nline10\n")
    out = ok(tmp_path, "read_file", {"file_path": "f.txt", "end_line": 2})
    assert out == truncated(1, 2, 11, "line1\nline2")


def test_read_default_window_is_2000_lines(tmp_path):
    (tmp_path / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    out = ok(tmp_path, "read_file", {"file_path": "big.txt"})
    body = "\n".join(str(i) for i in range(1, 2001))
    assert out == truncated(1, 2000, 2501, body)


def test_read_long_line_is_cut(tmp_path):
    (tmp_path / "long.txt").write_text("x" * 2500)
    out = ok(tmp_path, "read_file", {"file_path": "long.txt"})
    assert out == truncated(1, 1, 1, "x" * 2000 + "... [truncated]")


def test_read_binary_and_errors(tmp_path):
    (tmp_path / "b.dat").write_bytes(b"\x00\x01\x02")
    (tmp_path / "n.bin").write_bytes(b"\x7fELF\x00\x00")
    assert ok(tmp_path, "read_file", {"file_path": "b.dat"}) == "Cannot display content of binary file: b.dat"
    assert ok(tmp_path, "read_file", {"file_path": "n.bin"}) == "Cannot display content of binary file: n.bin"
    assert err(tmp_path, "read_file", {"file_path": "missing.txt"}, "file_not_found") == \
        "Could not read file because no file was found at the specified path."
    (tmp_path / "dir").mkdir()
    assert err(tmp_path, "read_file", {"file_path": "dir"}, "target_is_directory") == \
        "Could not read file because the provided path is a directory, not a file."
    with open(tmp_path / "huge.txt", "wb") as f:
        f.truncate(21 << 20)
    assert err(tmp_path, "read_file", {"file_path": "huge.txt"}, "file_too_large") == \
        "File size exceeds the 20MB limit."
    assert err(tmp_path, "read_file", {"file_path": "a", "start_line": 5, "end_line": 2},
               "invalid_tool_params").startswith("Error: Invalid parameters provided. Reason: end_line")


@pytest.mark.parametrize("path", ["/etc/hostname", "../outside.txt", "sub/../../x"])
def test_paths_outside_workspace_are_refused(tmp_path, path):
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("secret")
    msg = err(ws, "read_file", {"file_path": path}, "path_not_in_workspace")
    assert msg.startswith('Path not in workspace: Attempted path "')
    assert msg.endswith(f'" resolves outside the allowed workspace directories: {ws}')


def test_symlink_out_of_workspace_is_refused(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", ws / "link.txt")
    os.symlink(tmp_path, ws / "up")
    err(ws, "read_file", {"file_path": "link.txt"}, "path_not_in_workspace")
    err(ws, "write_file", {"file_path": "up/new.txt", "content": "x"}, "path_not_in_workspace")
    assert not (tmp_path / "new.txt").exists()
    (ws / "real.txt").write_text("inside")
    os.symlink("real.txt", ws / "in.txt")
    assert ok(ws, "read_file", {"file_path": "in.txt"}) == "inside"


# write_file

def test_write_creates_then_overwrites(tmp_path):
    p = tmp_path / "a" / "b" / "c.txt"
    assert ok(tmp_path, "write_file", {"file_path": "a/b/c.txt", "content": "v1"}) == \
        f"Successfully created and wrote to new file: {p}."
    assert p.read_text() == "v1"
    assert ok(tmp_path, "write_file", {"file_path": str(p), "content": "v2\n"}) == \
        f"Successfully overwrote file: {p}."
    assert p.read_text() == "v2\n"


def test_write_errors(tmp_path):
    (tmp_path / "d").mkdir()
    assert err(tmp_path, "write_file", {"file_path": "d", "content": "x"}, "invalid_tool_params") == \
        f"Error: Invalid parameters provided. Reason: Path is a directory, not a file: {tmp_path / 'd'}"
    err(tmp_path, "write_file", {"file_path": "/tmp/escape-toolbox.txt", "content": "x"},
        "path_not_in_workspace")
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        assert "Permission denied" in err(tmp_path, "write_file", {"file_path": "ro/x", "content": "x"})


# replace

def edit(root, path, old, new, **kw):
    return {"file_path": path, "instruction": "change it", "old_string": old, "new_string": new, **kw}


def test_replace_exactly_once(tmp_path):
    f = tmp_path / "f.py"
    f.write_text("a = 1\nb = 2\n")
    assert ok(tmp_path, "replace", edit(tmp_path, "f.py", "b = 2", "b = 3")) == \
        f"Successfully modified file: {f} (1 replacements)."
    assert f.read_text() == "a = 1\nb = 3\n"


def test_replace_failures_are_loud(tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("x\nx\ny\n")
    assert err(tmp_path, "replace", edit(tmp_path, "f.txt", "zzz", "q"), "edit_no_occurrence_found") == (
        f"Failed to edit, 0 occurrences found for old_string in {f}. No edits made. The exact text in "
        "old_string was not found. Ensure you're not escaping content incorrectly and check whitespace, "
        "indentation, and context. Use read_file tool to verify.")
    assert err(tmp_path, "replace", edit(tmp_path, "f.txt", "x", "q"), "edit_expected_occurrence_mismatch") == (
        f"Failed to edit, Expected 1 occurrence but found 2 for old_string in file: {f}. If you intended "
        "to replace multiple occurrences, set 'allow_multiple' to true.")
    assert err(tmp_path, "replace", edit(tmp_path, "f.txt", "y", "y"), "edit_no_change") == \
        f"No changes to apply. The old_string and new_string are identical in file: {f}"
    # whitespace must match exactly
    err(tmp_path, "replace", edit(tmp_path, "f.txt", " y", "q"), "edit_no_occurrence_found")
    assert f.read_text() == "x\nx\ny\n"
    assert err(tmp_path, "replace", edit(tmp_path, "nope.txt", "a", "b"), "file_not_found") == \
        f"File not found: {tmp_path / 'nope.txt'}"
    assert err(tmp_path, "replace", edit(tmp_path, "f.txt", "", "b"), "attempt_to_create_existing_file") == \
        f"File already exists, cannot create: {f}"
    err(tmp_path, "replace", edit(tmp_path, "/etc/hostname", "a", "b"), "path_not_in_workspace")


def test_replace_allow_multiple_and_expected_replacements(tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("x-x-x")
    assert ok(tmp_path, "replace", edit(tmp_path, "f.txt", "x", "y", allow_multiple=True)) == \
        f"Successfully modified file: {f} (3 replacements)."
    assert f.read_text() == "y-y-y"
    assert err(tmp_path, "replace", edit(tmp_path, "f.txt", "y", "z", expected_replacements=2)) == \
        f"Failed to edit, Expected 2 occurrences but found 3 for old_string in file: {f}"
    assert ok(tmp_path, "replace", edit(tmp_path, "f.txt", "y", "z", expected_replacements=3)).endswith(
        "(3 replacements).")
    assert f.read_text() == "z-z-z"


def test_replace_literal_not_regex(tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("a.*b $1 \\n")
    ok(tmp_path, "replace", edit(tmp_path, "f.txt", "a.*b $1 \\n", "$&"))
    assert f.read_text() == "$&"


def test_replace_empty_old_string_creates_file(tmp_path):
    assert ok(tmp_path, "replace", edit(tmp_path, "new/dir/n.txt", "", "hello\n")) == \
        f"Created new file: {tmp_path / 'new/dir/n.txt'} with provided content."
    assert (tmp_path / "new/dir/n.txt").read_text() == "hello\n"


# list_directory

def test_list_directory_dirs_first_sorted_with_sizes(tmp_path):
    (tmp_path / "b.txt").write_text("12345")
    (tmp_path / "A.txt").write_text("")
    (tmp_path / "zdir").mkdir()
    (tmp_path / "adir").mkdir()
    (tmp_path / ".hidden").write_text("h")
    assert ok(tmp_path, "list_directory", {"dir_path": "."}) == (
        f"Directory listing for {tmp_path}:\n[DIR] adir\n[DIR] zdir\n.hidden (1 bytes)\n"
        "A.txt (0 bytes)\nb.txt (5 bytes)")
    assert ok(tmp_path, "list_directory", {"dir_path": str(tmp_path), "ignore": ["*.txt", "z*"]}) == (
        f"Directory listing for {tmp_path}:\n[DIR] adir\n.hidden (1 bytes)")


def test_list_directory_gitignore(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("*.log\nbuild/\n")
    (tmp_path / "a.log").write_text("")
    (tmp_path / "build").mkdir()
    (tmp_path / "src").mkdir()
    assert ok(tmp_path, "list_directory", {"dir_path": "."}) == (
        f"Directory listing for {tmp_path}:\n[DIR] src\n.gitignore (13 bytes)\n\n(3 ignored)")
    out = ok(tmp_path, "list_directory", {"dir_path": ".",
                                          "file_filtering_options": {"respect_git_ignore": False}})
    assert "a.log (0 bytes)" in out and "[DIR] build" in out and "[DIR] .git" in out
    assert "ignored" not in out


def test_list_directory_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "f").write_text("")
    assert ok(tmp_path, "list_directory", {"dir_path": "empty"}) == f"Directory {tmp_path / 'empty'} is empty."
    assert err(tmp_path, "list_directory", {"dir_path": "nope"}) == \
        f"Error: Directory not found or inaccessible: {tmp_path / 'nope'}"
    assert err(tmp_path, "list_directory", {"dir_path": "f"}) == f"Error: Path is not a directory: {tmp_path / 'f'}"
    err(tmp_path, "list_directory", {"dir_path": "/"}, "path_not_in_workspace")


def test_list_directory_geminiignore_without_git(tmp_path):
    (tmp_path / ".geminiignore").write_text("secret*\n")
    (tmp_path / "secret.env").write_text("k")
    (tmp_path / "ok.txt").write_text("")
    assert ok(tmp_path, "list_directory", {"dir_path": "."}) == (
        f"Directory listing for {tmp_path}:\n.geminiignore (8 bytes)\nok.txt (0 bytes)\n\n(1 ignored)")
    out = ok(tmp_path, "list_directory", {"dir_path": ".",
                                          "file_filtering_options": {"respect_gemini_ignore": False}})
    assert "secret.env (1 bytes)" in out
    # without .git a .gitignore means nothing
    (tmp_path / ".gitignore").write_text("ok.txt\n")
    assert "ok.txt (0 bytes)" in ok(tmp_path, "list_directory", {"dir_path": "."})
