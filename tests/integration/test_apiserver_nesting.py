"""How deeply an object may nest (API_MAX_DEPTH, docs/api-server.md): a deeper request body is a
400 Status before it is parsed, a patch that would make an object deeper is 422 Invalid, and
objects a server stored before the limit are still served whole."""
import json
import os
import sqlite3

from asb_apiserver import CORE, asb, sandbox, start_asb  # noqa: F401 (fixtures)

LIMIT = 100
# Every field of our kinds has a finite depth in the schema, except ObjectMeta's managedFields
# entries' fieldsV1 (free-form, as in kube-apiserver): {metadata: {managedFields: [{fieldsV1: ...}]}}.
FREE_DEPTH = 4


def nest(n, leaf="leaf"):
    v = leaf
    for _ in range(n):
        v = {"x": v}
    return v


def deep_sandbox(name, levels):
    """A Sandbox whose managedFields entry (free-form in the schema) carries `levels` nested
    objects."""
    body = sandbox(name)
    body["metadata"]["managedFields"] = [{"manager": "test", "fieldsV1": nest(levels)}]
    return body


def depth(v):
    if isinstance(v, dict):
        return 1 + max((depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((depth(x) for x in v), default=0)
    return 0


def post_text(asb, text):
    return asb.request("POST", asb.path(CORE, "sandboxes"), data=text,
                       headers={"Content-Type": "application/json"})


def test_bodies_deeper_than_the_limit_are_refused(asb):
    at_limit = deep_sandbox("at-limit", LIMIT - FREE_DEPTH)
    assert depth(at_limit) == LIMIT
    r = asb.post(asb.path(CORE, "sandboxes"), at_limit)
    assert r.status_code == 201, r.text
    assert depth(r.json()) == LIMIT
    r = asb.post(asb.path(CORE, "sandboxes"), deep_sandbox("over", LIMIT - FREE_DEPTH + 1))
    assert r.status_code == 400, r.text
    st = r.json()
    assert st["kind"] == "Status" and st["reason"] == "BadRequest"
    assert "deeper than 100 levels" in st["message"]
    # Deep where the schema has no room is pruned: a warning, nothing deep stored.
    body = sandbox("typo")
    body["spec"]["podTemplate"]["spec"]["containers"][0]["x"] = nest(50)
    r = asb.post(asb.path(CORE, "sandboxes"), body)
    assert r.status_code == 201 and "x" not in r.json()["spec"]["podTemplate"]["spec"]["containers"][0]
    assert asb.delete(asb.path(CORE, "sandboxes", name="typo")).status_code == 200
    # Far deeper than the limit, under a field that would be pruned, and as a merge patch.
    text = json.dumps(sandbox("pruned"))[:-1] + ', "zz": ' + "[" * 2040 + "]" * 2040 + "}"
    r = post_text(asb, text)
    assert r.status_code == 400 and "deeper than 100 levels" in r.json()["message"], r.text
    r = asb.merge_patch(asb.path(CORE, "sandboxes", name="at-limit"), {"metadata": nest(150)})
    assert r.status_code == 400 and "deeper than 100 levels" in r.json()["message"], r.text
    # Brackets inside strings are text, not nesting.
    body = sandbox("brackets", labels={"a": "b"})
    body["metadata"]["annotations"] = {"text": "[{" * 3000 + '\\"]'}
    r = asb.post(asb.path(CORE, "sandboxes"), body)
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["annotations"]["text"] == "[{" * 3000 + '\\"]'
    assert asb.get(asb.path(CORE, "sandboxes", name="pruned")).status_code == 404
    assert len(asb.get(asb.path(CORE, "sandboxes")).json()["items"]) == 2


def test_a_patch_cannot_nest_an_object_deeper(asb):
    levels = LIMIT - FREE_DEPTH - 4
    r = asb.post(asb.path(CORE, "sandboxes"), deep_sandbox("grows", levels))
    assert r.status_code == 201, r.text
    # Each patch body is shallow; the object it would make is not.
    innermost = "/metadata/managedFields/0/fieldsV1" + "/x" * (levels - 1)  # {"x": "leaf"}
    ops = [{"op": "replace", "path": innermost, "value": nest(10)}]
    r = asb.request("PATCH", asb.path(CORE, "sandboxes", name="grows"), data=json.dumps(ops),
                    headers={"Content-Type": "application/json-patch+json"})
    assert r.status_code == 422, r.text
    st = r.json()
    assert st["reason"] == "Invalid"
    assert "nested deeper than 100 levels" in st["message"], st["message"]
    stored = asb.get(asb.path(CORE, "sandboxes", name="grows")).json()
    assert depth(stored) == FREE_DEPTH + levels
    # Within the limit the same patch goes through.
    ops = [{"op": "replace", "path": innermost, "value": nest(5)}]
    r = asb.request("PATCH", asb.path(CORE, "sandboxes", name="grows"), data=json.dumps(ops),
                    headers={"Content-Type": "application/json-patch+json"})
    assert r.status_code == 200, r.text
    assert depth(r.json()) == LIMIT


def test_objects_stored_deeper_before_the_limit_are_served(start_asb, tmp_path):
    """A database written by a server without the limit (jansson alone allows 2048 levels): the
    server starts, says why its request threads keep the default stack, and serves the object
    whole through GET, LIST and a watch, where a small stack would overflow."""
    state = tmp_path / "state"
    first = start_asb(state_dir=state)
    assert first.post(first.path(CORE, "sandboxes"), sandbox("old")).status_code == 201
    assert first.stop() == 0
    db = sqlite3.connect(os.path.join(state, "state.db"))
    with db:
        (data,) = db.execute("SELECT data FROM objects WHERE name = 'old'").fetchone()
        obj = json.loads(data)
        obj["spec"]["podTemplate"]["spec"]["containers"][0]["x"] = "DEEP"
        # Python's encoder stops near 1000 levels: the nesting goes in as text.
        text = json.dumps(obj, separators=(",", ":")).replace(
            '"DEEP"', '{"x":' * 2000 + '"leaf"' + "}" * 2000)
        n = db.execute("UPDATE objects SET data = ? WHERE name = 'old'", (text,)).rowcount
        assert n == 1
    db.close()

    second = start_asb(state_dir=state)
    assert "nested deeper than the API accepts now" in second.output()
    r = second.get(second.path(CORE, "sandboxes", name="old"))
    assert r.status_code == 200, r.text
    # Python's parser stops near 1000 levels too: count in the text.
    assert r.text.count('{"x":') == 2000
    r = second.get(second.path(CORE, "sandboxes"))
    assert r.status_code == 200 and r.text.count('{"x":') == 2000
    r = second.get(second.path(CORE, "sandboxes"),
                   params={"watch": "true", "timeoutSeconds": "1"})
    assert r.status_code == 200 and r.text.count('{"x":') == 2000
    # It can be deleted, and new objects are held to the limit.
    assert second.delete(second.path(CORE, "sandboxes", name="old")).status_code == 200
    r = second.post(second.path(CORE, "sandboxes"), deep_sandbox("new", LIMIT))
    assert r.status_code == 400, r.text
