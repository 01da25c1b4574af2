"""geminicli-toolbox search tools: glob, grep_search, read_many_files (AGENT.md §2.6-2.8)."""
import os
import time

from toolbox_helpers import err, ok


def tree(root, files, old=()):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    week_ago = time.time() - 7 * 86400
    for i, rel in enumerate(old):
        os.utime(root / rel, (week_ago + i, week_ago + i))


# glob

def test_glob_recent_first_then_alphabetical(tmp_path):
    tree(tmp_path, {"src/b.ts": "", "src/a.ts": "", "src/deep/c.tsx": "", "z.ts": "", "y.ts": "",
                    "notes.md": ""}, old=["y.ts", "src/a.ts"])
    now = time.time()
    os.utime(tmp_path / "src/b.ts", (now - 100, now - 100))
    os.utime(tmp_path / "z.ts", (now - 50, now - 50))
    os.utime(tmp_path / "src/deep/c.tsx", (now - 10, now - 10))
    out = ok(tmp_path, "glob", {"pattern": "**/*.{ts,tsx}"})
    paths = [str(tmp_path / p) for p in ["src/deep/c.tsx", "z.ts", "src/b.ts", "src/a.ts", "y.ts"]]
    assert out == (f'Found 5 file(s) matching "**/*.{{ts,tsx}}" within {tmp_path}, sorted by '
                   "modification time (newest first):\n" + "\n".join(paths))


def test_glob_case_dir_and_dotfiles(tmp_path):
    tree(tmp_path, {"docs/README.MD": "", "docs/.hidden.md": "", "other/x.md": "",
                    "node_modules/m.md": "", "docs/link": ""})
    os.remove(tmp_path / "docs/link")
    os.symlink(tmp_path / "other", tmp_path / "docs/link")  # not followed
    out = ok(tmp_path, "glob", {"pattern": "*.md", "dir_path": "docs"})
    assert out.splitlines()[1:] == sorted([str(tmp_path / "docs/.hidden.md"), str(tmp_path / "docs/README.MD")],
                                          key=lambda p: -os.stat(p).st_mtime_ns)
    out = ok(tmp_path, "glob", {"pattern": "*.md", "dir_path": "docs", "case_sensitive": True})
    assert out.splitlines()[1:] == [str(tmp_path / "docs/.hidden.md")]
    assert "node_modules" not in ok(tmp_path, "glob", {"pattern": "**/*.md"})


def test_glob_no_match_gitignore_and_errors(tmp_path):
    tree(tmp_path, {".gitignore": "dist/\n", "dist/a.js": "", "src/b.js": ""})
    (tmp_path / ".git").mkdir()
    out = ok(tmp_path, "glob", {"pattern": "**/*.js"})
    assert out.startswith('Found 1 file(s) matching "**/*.js" within ')
    assert " (1 additional files were git-ignored), sorted" in out
    assert len(ok(tmp_path, "glob", {"pattern": "**/*.js", "respect_git_ignore": False}).splitlines()) == 3
    assert ok(tmp_path, "glob", {"pattern": "*.rs"}) == f'No files found matching pattern "*.rs" within {tmp_path}'
    assert err(tmp_path, "glob", {"pattern": "*", "dir_path": "nope"}).startswith(
        "Error: Invalid parameters provided. Reason: Search path does not exist")
    assert err(tmp_path, "glob", {"pattern": "*", "dir_path": ".gitignore"}) == (
        f"Error: Invalid parameters provided. Reason: Search path is not a directory: {tmp_path / '.gitignore'}")
    err(tmp_path, "glob", {"pattern": "*", "dir_path": ".."}, "path_not_in_workspace")


def test_glob_literal_name_with_special_chars(tmp_path):
    tree(tmp_path, {"app/[id]/page.tsx": "", "app/x/page.tsx": ""})
    out = ok(tmp_path, "glob", {"pattern": "app/[id]/page.tsx"})
    assert out.splitlines()[1:] == [str(tmp_path / "app/[id]/page.tsx")]
    # a literal name outside the workspace is not found
    (tmp_path / "x[1].txt").write_text("")
    ws = tmp_path / "app"
    assert ok(ws, "glob", {"pattern": "../x[1].txt"}).startswith("No files found")
    assert ok(ws, "glob", {"pattern": "../app/[id]/page.tsx"}).endswith("/app/[id]/page.tsx")


# grep_search

def test_grep_format_and_case_insensitive_default(tmp_path):
    tree(tmp_path, {"a.py": "def Foo():\n    pass\n", "b/c.py": "x = 1\nfoo()\nfoo()\nfoo()\nfoo()\n",
                    "d.txt": "FOO\n"})
    out = ok(tmp_path, "grep_search", {"pattern": "foo", "include_pattern": "*.py"})
    assert out == ('Found 5 matches for pattern "foo" in the workspace directory (filter: "*.py"):\n---\n'
                   "File: a.py\nL1: def Foo():\n---\nFile: b/c.py\nL2: foo()\nL3: foo()\nL4: foo()\nL5: foo()\n---")
    out = ok(tmp_path, "grep_search", {"pattern": "foo", "case_sensitive": True, "dir_path": "b",
                                       "total_max_matches": 2, "context": 0})
    assert out == ('Found 2 matches for pattern "foo" in path "b" (results limited to 2 matches for '
                   "performance):\n---\nFile: c.py\nL2: foo()\nL3: foo()\n---")


def test_grep_context_caps_names_only_exclude(tmp_path):
    tree(tmp_path, {"f.txt": "".join(f"line {i}\n" for i in range(1, 21)) + "TODO end\n",
                    "g.txt": "TODO a\nTODO b\nskip TODO\n"})
    out = ok(tmp_path, "grep_search", {"pattern": r"line 1\d", "context": 1, "max_matches_per_file": 2,
                                       "dir_path": "f.txt"})
    assert out == ('Found 2 matches for pattern "line 1\\d" in path "f.txt":\n---\nFile: f.txt\n'
                   "L9- line 9\nL10: line 10\nL11: line 11\nL12- line 12\n---")
    out = ok(tmp_path, "grep_search", {"pattern": "todo", "names_only": True})
    assert out == 'Found 2 files with matches for pattern "todo" in the workspace directory:\nf.txt\ng.txt'
    out = ok(tmp_path, "grep_search", {"pattern": "TODO", "exclude_pattern": "^skip", "dir_path": "g.txt",
                                       "before": 0, "after": 0})
    assert out.endswith("File: g.txt\nL1: TODO a\nL2: TODO b\n---")


def test_grep_adds_context_to_few_matches(tmp_path):
    tree(tmp_path, {"f.txt": "".join(f"l{i}\n" for i in range(1, 101))})
    out = ok(tmp_path, "grep_search", {"pattern": "^l60$"})
    lines = out.split("\n")
    assert lines[3] == "L10- l10" and "L60: l60" in lines and lines[-2] == "L100- l100"
    out = ok(tmp_path, "grep_search", {"pattern": "^l(20|80)$"})
    assert "L5- l5" in out and "L4- l4" not in out and "L95- l95" in out and "L96- l96" not in out


def test_grep_no_match_binary_and_errors(tmp_path):
    tree(tmp_path, {"a.txt": "hello\n"})
    (tmp_path / "bin.dat").write_bytes(b"hello\x00world")
    assert ok(tmp_path, "grep_search", {"pattern": "nomatch", "include_pattern": "*.txt"}) == \
        'No matches found for pattern "nomatch" in the workspace directory (filter: "*.txt").'
    assert "bin.dat" not in ok(tmp_path, "grep_search", {"pattern": "hello"})
    assert err(tmp_path, "grep_search", {"pattern": "a(b"}).startswith(
        "Error: Invalid parameters provided. Reason: Invalid regular expression pattern provided: a(b. Error: ")
    assert ok(tmp_path, "grep_search", {"pattern": "l+o", "fixed_strings": True}).startswith("No matches")
    err(tmp_path, "grep_search", {"pattern": "x", "dir_path": "/etc"}, "path_not_in_workspace")
    assert "does not exist" in err(tmp_path, "grep_search", {"pattern": "x", "dir_path": "nope"})


# read_many_files

def test_read_many_files_concatenates(tmp_path):
    tree(tmp_path, {"src/a.c": "int a;\n", "src/b.h": "int b;", "src/c.o": "", "README": "hi",
                    "node_modules/x.c": "no"})
    (tmp_path / "src/c.o").write_bytes(b"\x00\x01")
    out = ok(tmp_path, "read_many_files", {"include": ["src/*.{c,h,o}", "README"], "exclude": ["*.h"]})
    assert out == (f"--- {tmp_path}/README ---\n\nhi\n\n--- {tmp_path}/src/a.c ---\n\nint a;\n\n\n"
                   "\n--- End of content ---")
    out = ok(tmp_path, "read_many_files", {"include": ["**/*.c"]})
    assert "node_modules" not in out and "int a;" in out
    out = ok(tmp_path, "read_many_files", {"include": ["**/*.c"], "useDefaultExcludes": False})
    assert f"--- {tmp_path}/node_modules/x.c ---" in out


def test_read_many_files_directory_truncation_and_nothing(tmp_path):
    tree(tmp_path, {"d/big.txt": "".join(f"{i}\n" for i in range(3000)), "d/s/small.txt": "s"})
    out = ok(tmp_path, "read_many_files", {"include": ["d"]})
    assert (f"--- {tmp_path}/d/big.txt ---\n\n[WARNING: This file was truncated. To view the full content, "
            "use the 'read_file' tool on this specific file.]\n\n0\n1\n") in out
    assert f"--- {tmp_path}/d/s/small.txt ---\n\ns\n\n" in out
    assert "small.txt" not in ok(tmp_path, "read_many_files", {"include": ["d"], "recursive": False})
    assert ok(tmp_path, "read_many_files", {"include": ["*.none", "/etc/passwd"]}) == \
        "No files matching the criteria were found or all were skipped."


def test_geminiignore_applies_to_search_tools(tmp_path):
    tree(tmp_path, {".geminiignore": "gen/\n", "gen/x.py": "needle\n", "src/y.py": "needle\n"})
    assert ok(tmp_path, "glob", {"pattern": "**/*.py"}).splitlines()[1:] == [str(tmp_path / "src/y.py")]
    assert len(ok(tmp_path, "glob", {"pattern": "**/*.py", "respect_gemini_ignore": False}).splitlines()) == 3
    assert "gen/x.py" not in ok(tmp_path, "grep_search", {"pattern": "needle"})
    assert "gen/x.py" in ok(tmp_path, "grep_search", {"pattern": "needle", "no_ignore": True})
    assert "gen/x.py" not in ok(tmp_path, "read_many_files", {"include": ["**/*.py"]})
