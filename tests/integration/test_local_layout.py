"""src/local is in rooms (issue 35, section 2): every file of it sits in a folder, each folder's
main header opens with its contract ("/* local/<folder>: ..."), and no folder includes, directly
or through others, a folder that includes it back."""
import os
import re

from conftest import ROOT

LOCAL = os.path.join(ROOT, "src", "local")
INCLUDE = re.compile(r'^#include "local/([a-z]+)/local-[a-z0-9-]+\.h"', re.M)
FLAT = re.compile(r'^#include "local/local-', re.M)


def folders():
    return sorted(d for d in os.listdir(LOCAL) if os.path.isdir(os.path.join(LOCAL, d)))


def folder_graph():
    """{folder: {folder it includes}}, and the flat includes left over (there must be none)."""
    graph, flat = {}, []
    for top in ("src", "tests", "fuzz"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, errors="replace") as fh:
                    text = fh.read()
                if FLAT.search(text):
                    flat.append(os.path.relpath(path, ROOT))
                rel = os.path.relpath(path, LOCAL)
                if rel.startswith(".."):
                    continue
                me = rel.split(os.sep)[0]
                graph.setdefault(me, set()).update(d for d in INCLUDE.findall(text) if d != me)
    return graph, flat


def cycle_from(graph, start):
    """A path start -> ... -> start through the folder graph, or None."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_no_file_outside_a_folder():
    loose = [f for f in os.listdir(LOCAL) if os.path.isfile(os.path.join(LOCAL, f))]
    assert loose == []
    assert len(folders()) >= 6, folders()


def test_every_folder_states_its_contract():
    missing = []
    for d in folders():
        heads = []
        for f in sorted(os.listdir(os.path.join(LOCAL, d))):
            if f.endswith(".h"):
                with open(os.path.join(LOCAL, d, f)) as fh:
                    heads.append(fh.read(200))
        if not any(h.startswith(f"/* local/{d}: ") for h in heads):
            missing.append(d)
    assert missing == [], f"folders whose main header does not open with their contract: {missing}"


def test_no_include_cycle_between_folders():
    graph, flat = folder_graph()
    assert flat == [], f"includes of src/local without their folder: {flat}"
    assert set(graph) == set(folders())
    assert any(graph.values())  # the includes were read
    cycles = [c for c in (cycle_from(graph, d) for d in sorted(graph)) if c]
    assert cycles == [], " ; ".join(" -> ".join(c) for c in cycles)
