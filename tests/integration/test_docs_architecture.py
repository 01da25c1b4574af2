"""docs/architecture.md describes the tree as it is (issue 35): every file or directory it names in
backquotes exists (a bare file name somewhere under src/, include/, tests/, fuzz/, scripts/ or
deploy/; a path from the repository's root; `<kind>`-style placeholders and `*` as globs)."""
import glob
import os
import re

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "architecture.md")
SEARCHED = ("src", "include", "tests", "fuzz", "scripts", "deploy", "tools", "proto", "bench")
TOP = "(?:src|include|tests|fuzz|scripts|deploy|tools|docs|proto|bench|examples)"
PATHLIKE = re.compile(r"`([A-Za-z0-9_.*<>/-]+\.(?:c|h|py|sh|md|yaml|json|proto)|" + TOP +
                      r"/[A-Za-z0-9_./*<>-]*)`")


def named_paths():
    with open(DOC) as f:
        text = f.read()
    return sorted({m.group(1) for m in PATHLIKE.finditer(text)
                   if not m.group(1).startswith("-") and not m.group(1).startswith("build/")})


def exists(name):
    pattern = re.sub(r"<[^>]+>", "*", name)
    if "/" in pattern.rstrip("/"):
        return bool(glob.glob(os.path.join(ROOT, pattern)))
    base = pattern.rstrip("/")
    return any(glob.glob(os.path.join(ROOT, top, "**", base), recursive=True) for top in SEARCHED)


def test_every_path_named_exists():
    names = named_paths()
    assert len(names) > 50, names  # the map is read, not skipped
    missing = [n for n in names if not exists(n)]
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"
