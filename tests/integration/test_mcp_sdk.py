"""`asb mcp` driven by the official MCP TypeScript SDK client (tests/mcp, pinned in
package-lock.json) over stdio and Streamable HTTP, against a real `asb serve` with runc sandboxes
claimed from a warm pool."""
import pytest

from asb_apiserver import asb, asb_binary, start_asb  # noqa: F401  (fixtures)
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)
from mcp_helpers import McpHttp, client_env, drive, make_pool

TOOLS = ["create_sandbox", "delete_sandbox", "execute_command", "upload_file", "download_file",
         "list_files", "file_exists", "snapshot_sandbox", "fork_sandbox", "get_preview_url"]


@pytest.fixture
def stack(start_sbx):  # noqa: F811
    asb = start_sbx()
    make_pool(asb)
    return asb


@pytest.fixture(params=["stdio", "http"])
def endpoint(request, stack, tmp_path):
    """(transport, target, env) for drive(): stdio spawns `asb mcp` itself; http runs one."""
    asb = stack
    if request.param == "stdio":
        yield asb, "stdio", asb_binary(), client_env(asb)
        return
    mcp = McpHttp(tmp_path, asb).start()
    yield asb, "http", mcp.url, client_env(asb, MCP_TOKEN=asb.token)
    assert mcp.stop() == 0


def test_every_tool(endpoint):
    asb, transport, target, env = endpoint
    check_every_tool(drive("tools", transport, target, env))


def test_every_tool_via_router(stack):
    """--via-router: the data plane through `asb serve`'s router, as against a cluster."""
    check_every_tool(drive("tools", "stdio", asb_binary(), client_env(stack, MCP_ARGS="--via-router")))


def check_every_tool(rep, after_delete=True):
    assert rep["server"]["name"] == "asb-mcp"
    assert sorted(t["name"] for t in rep["tools"]) == sorted(TOOLS)
    assert all(t["hasOutput"] for t in rep["tools"])
    create = rep["create"]
    assert not create["isError"], create
    assert create["structured"]["sandbox_claim_name"].startswith("sandbox-claim-")
    assert create["structured"]["namespace"] == "default"
    ex = rep["exec"]
    assert ex["structured"] == {"exit_code": 3, "stdout": "out-42\n", "stderr": "err\n"}, ex
    assert rep["upload"]["structured"] == {"path": "work/hello.txt", "bytes_written": 10}
    assert rep["uploadBinary"]["structured"]["bytes_written"] == 4
    assert rep["download"]["structured"]["content"] == "hello mcp\n"
    assert rep["download"]["structured"]["size"] == 10
    assert rep["downloadBinary"]["structured"]["content"] == "AP8BgA=="
    assert rep["downloadNotText"]["isError"] and "binary" in rep["downloadNotText"]["text"]
    listing = rep["list"]["structured"]
    assert [e["name"] for e in listing["entries"]] == ["bin.dat", "hello.txt"]
    assert listing["entries"][1]["size"] == 10 and listing["entries"][1]["type"] == "file"
    assert listing["entries"][1]["mod_time"].endswith("Z")
    assert listing["total_entries"] == 2 and listing["truncated"] is False
    capped = rep["listCapped"]["structured"]
    assert len(capped["entries"]) == 1 and capped["total_entries"] == 2 and capped["truncated"]
    assert rep["exists"]["structured"]["exists"] is True
    assert rep["missing"] == {"isError": False, "structured": {"path": "work/nope.txt", "exists": False},
                              "text": rep["missing"]["text"]}
    assert rep["downloadMissing"]["isError"] and "no such file" in rep["downloadMissing"]["text"]
    assert rep["escape"]["isError"], rep["escape"]
    assert rep["bySandboxName"]["structured"]["exists"] is True
    assert rep["unknown"]["isError"] and "unknown sandbox \"no-such-claim\"" in rep["unknown"]["text"]
    assert rep["unknownPool"]["isError"] and "unknown warm pool" in rep["unknownPool"]["text"]
    assert rep["timeout"]["isError"] and "timed out after 1 s" in rep["timeout"]["text"]
    assert rep["unknownTool"]["code"] == -32602
    name = create["structured"]["sandbox_name"]
    assert "asb://sandboxes" in rep["resources"]
    assert f"asb://sandboxes/default/{name}/files/" in rep["resources"]
    assert rep["templates"] == ["asb://sandboxes/{namespace}/{sandbox}/files/{+path}"]
    mine = [s for s in rep["sandboxes"]["sandboxes"] if s["name"] == name]
    assert len(mine) == 1 and mine[0]["claim"] == create["structured"]["sandbox_claim_name"]
    assert mine[0]["pool"] == "mcp-pool" and mine[0]["ready"] is True and mine[0]["age_seconds"] >= 0
    assert rep["fileResource"]["text"] == "hello mcp\n"
    assert rep["blobResource"]["blob"] == "AP8BgA==" and "text" not in rep["blobResource"]
    assert rep["blobResource"]["mimeType"] == "application/octet-stream"
    assert sorted(e["name"] for e in rep["dirResource"]) == ["bin.dat", "hello.txt"]
    assert rep["missingResource"]["code"] == -32002
    assert rep["delete"]["structured"] == {"deleted": create["structured"]["sandbox_claim_name"],
                                           "kind": "SandboxClaim"}
    assert rep["deleteAgain"]["isError"] and "unknown sandbox" in rep["deleteAgain"]["text"]
    if not after_delete:
        return
    # Resolved afresh ("unknown sandbox"), or, through the router, its own 404 for the sandbox.
    after = rep["afterDelete"]
    assert after["isError"] and ("unknown sandbox" in after["text"] or
                                 f'Sandbox "{name}" not found' in after["text"]), after


def test_progress_streams_output(endpoint):
    asb, transport, target, env = endpoint
    rep = drive("progress", transport, target, env)
    # The pool had a Ready member: the claim takes it (no cold start).
    assert len(rep["createProgress"]) == 1, rep["createProgress"]
    assert "taking a warm sandbox from pool \"mcp-pool\"" in rep["createProgress"][0]["message"]
    assert rep["result"]["structured"]["stdout"] == "line1\nline2\nline3\nline4\n"
    events = rep["progress"]
    assert len(events) >= 2, events
    # Output arrives while the command runs, not all at the end.
    assert "line1" in events[0]["message"] and events[0]["at"] < rep["elapsed"] - 800, events
    assert all(a["progress"] < b["progress"] for a, b in zip(events, events[1:]))
    assert "line4" in "".join(e["message"] for e in events)


def test_cancel_kills_the_process_group(endpoint):
    asb, transport, target, env = endpoint
    rep = drive("cancel", transport, target, env)
    assert rep["cancelled"] is not None and rep["elapsed"] < 10000, rep
    assert rep["left"]["structured"]["stdout"].strip() == "0", rep["left"]
    assert not rep["delete"]["isError"]


def test_http_client_gone_cancels_the_command(stack, tmp_path):
    """An SSE tool call whose client disconnects is cancelled (the silent stream's keep-alive
    comment fails to send) and its processes are killed."""
    import json
    import socket
    import time
    import requests
    mcp = McpHttp(tmp_path, stack, args=["--auth-token", "tok"]).start()
    try:
        h = {"Authorization": "Bearer tok", "Accept": "application/json, text/event-stream",
             "Content-Type": "application/json"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "0"}}}
        r = requests.post(mcp.url, json=init, headers=h, timeout=10)
        h["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]

        def tool(id_, name, args, meta=None):
            params = {"name": name, "arguments": args, **({"_meta": meta} if meta else {})}
            return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}

        made = requests.post(mcp.url, json=tool(2, "create_sandbox", {"warmpool": "mcp-pool"}),
                             headers=h, timeout=120).json()["result"]["structuredContent"]
        sb = {"sandbox_claim_name": made["sandbox_claim_name"]}
        body = json.dumps(tool(3, "execute_command", {**sb, "command": "sleep 6787"},
                               {"progressToken": "p"})).encode()
        host, port = mcp.address.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=10)
        head = "".join(f"{k}: {v}\r\n" for k, v in h.items())
        s.sendall(f"POST /mcp HTTP/1.1\r\nHost: {mcp.address}\r\n{head}Content-Length: {len(body)}\r\n\r\n"
                  .encode() + body)
        count = "grep -l 'sleep 678[7]' /proc/[0-9]*/cmdline 2>/dev/null | wc -l"

        def running():
            return requests.post(mcp.url, json=tool(4, "execute_command", {**sb, "command": count}),
                                 headers=h, timeout=30).json()["result"]["structuredContent"]
        started = None
        for _ in range(40):  # the command runs before its client goes
            started = running()
            if started["stdout"].strip() == "1":
                break
            time.sleep(0.25)
        assert started["stdout"].strip() == "1", started
        s.close()
        left = None
        for _ in range(40):
            left = running()
            if left["stdout"].strip() == "0":
                break
            time.sleep(0.25)
        assert left["stdout"].strip() == "0", left
        requests.post(mcp.url, json=tool(5, "delete_sandbox", sb), headers=h, timeout=30)
    finally:
        assert mcp.stop() == 0


def test_sdk_client_without_token_is_refused(tmp_path):
    class NoServer:
        state_dir = "/nonexistent-asb-state"
    mcp = McpHttp(tmp_path, NoServer(), args=["--auth-token", "tok"]).start()
    try:
        env = client_env(NoServer())
        env.pop("MCP_TOKEN", None)
        rep = drive("noauth", "http", mcp.url, env)
        assert rep["error"]["code"] == 401 and "Unauthorized" in rep["error"]["message"], rep
        env["MCP_TOKEN"] = "wrong"
        rep = drive("noauth", "http", mcp.url, env)
        assert rep["error"]["code"] == 401 and "Unauthorized" in rep["error"]["message"], rep
    finally:
        assert mcp.stop() == 0


def test_create_sandbox_options(stack):
    """labels, pod_labels, pod_annotations and shutdown_after_seconds reach the SandboxClaim."""
    import datetime
    from asb_apiserver import EXT
    from claims_helpers import get
    rep = drive("create", "stdio", asb_binary(), client_env(stack))
    assert not rep["withOptions"]["isError"], rep
    made = rep["withOptions"]["structured"]
    claim = get(stack, EXT, "sandboxclaims", made["sandbox_claim_name"])
    assert claim["metadata"]["labels"] == {"team": "mcp", "agents.x-k8s.io/created-by": "asb-mcp"}
    assert claim["spec"]["additionalPodMetadata"] == {
        "labels": {"sandbox.users.io/tier": "agents"},
        "annotations": {"sandbox.users.io/note": "from-mcp"}}
    lc = claim["spec"]["lifecycle"]
    assert lc["shutdownPolicy"] == "Delete"
    when = datetime.datetime.strptime(lc["shutdownTime"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)
    left = (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    assert 500 < left <= 600, left
    # null: no shutdown at all (the second claim cold-starts: the pool had one member).
    assert not rep["noShutdown"]["isError"], rep["noShutdown"]
    other = get(stack, EXT, "sandboxclaims", rep["noShutdown"]["structured"]["sandbox_claim_name"])
    assert "lifecycle" not in other["spec"]
    assert rep["badLabels"]["isError"] and "labels" in rep["badLabels"]["text"]
    for c in (claim, other):
        r = stack.delete(stack.path(EXT, "sandboxclaims", "default", c["metadata"]["name"]))
        assert r.status_code == 200, r.text


def test_cold_path_progress_and_timeout_error(asb):  # noqa: F811  (ASB_RUNTIME=none)
    """A pool with no ready sandbox: create_sandbox says the cold path is taken (progress), and
    when the sandbox is not ready in time the error tells the agent what happened and what to
    do; the claim is rolled back."""
    from asb_apiserver import EXT
    from claims_helpers import create, items, pool, template
    create(asb, EXT, "sandboxtemplates", template("mcp-pool-tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("mcp-pool", "mcp-pool-tpl", replicas=1))
    rep = drive("coldTimeout", "stdio", asb_binary(), client_env(asb))
    assert len(rep["progress"]) == 1, rep
    msg = rep["progress"][0]["message"]
    assert 'pool "mcp-pool" has no ready sandbox' in msg and "cold path; waiting up to 1 s" in msg
    res = rep["result"]
    assert res["isError"], res
    assert 'from warm pool "mcp-pool" was not ready within 1 s' in res["text"], res
    assert "retry with a larger sandbox_ready_timeout, or wait for the pool to refill" in res["text"]
    assert items(asb, EXT, "sandboxclaims") == []


def test_snapshot_and_fork(stack):
    """snapshot_sandbox and fork_sandbox (issue 18): schemas, a named snapshot with its numbers,
    K forks from it that hold exactly the files of the moment of the snapshot and are independent,
    a fork of the sandbox as it is now, and errors that say what to do."""
    from asb_apiserver import EXT
    from claims_helpers import get
    rep = drive("snapshot", "stdio", asb_binary(), client_env(stack), timeout=400)
    tools = {t["name"]: t for t in rep["tools"]}
    assert tools["snapshot_sandbox"]["input"]["required"] == ["sandbox_claim_name"]
    assert tools["fork_sandbox"]["input"]["properties"]["count"]["maximum"] == 20
    assert "sandbox_names" in tools["fork_sandbox"]["output"]["required"]
    snap = rep["snap"]
    assert not snap["isError"], snap
    s = snap["structured"]
    assert s["snapshot_name"] == "mcp-snap" and s["sandbox_name"] == rep["source"]
    assert s["ready"] is True and s["files"] >= 3 and s["size_bytes"] >= len("prepared\n")
    assert s["pause_microseconds"] >= 0 and s["captured_at"].endswith("Z")
    obj = get(stack, EXT, "sandboxsnapshots", "mcp-snap")
    assert obj["spec"]["sandboxRef"]["name"] == rep["source"]
    assert rep["snapAgain"]["isError"] and "already exists" in rep["snapAgain"]["text"]
    assert rep["snapUnknown"]["isError"] and 'unknown sandbox "no-such-claim"' in rep["snapUnknown"]["text"]
    assert rep["snapNoName"]["isError"] and "sandbox_claim_name is required" in rep["snapNoName"]["text"]
    fork = rep["forkFromSnap"]
    assert not fork["isError"], fork
    assert fork["structured"] == {"snapshot_name": "mcp-snap", "namespace": "default",
                                  "sandbox_names": ["mcp-fork-1", "mcp-fork-2"]}
    for listing in rep["forkFiles"]:
        assert [e["name"] for e in listing["structured"]["entries"]] == ["before.txt"], listing
    assert rep["sourceAfterForkWrite"]["structured"]["exists"] is False
    assert rep["otherForkAfterWrite"]["structured"]["exists"] is False
    now = rep["forkNow"]
    assert not now["isError"], now
    assert now["structured"]["snapshot_name"].startswith(rep["source"] + "-snap-")
    assert len(now["structured"]["sandbox_names"]) == 1
    assert rep["forkNowAfter"]["structured"]["content"] == "later\n"
    assert rep["forkUnknownSnap"]["isError"] and 'unknown snapshot "no-such-snap"' in rep["forkUnknownSnap"]["text"]
    assert rep["forkNothing"]["isError"] and "sandbox_claim_name" in rep["forkNothing"]["text"] \
        and "snapshot" in rep["forkNothing"]["text"]
    assert rep["forkTooMany"]["isError"] and "from 1 to 20" in rep["forkTooMany"]["text"]
    taken = rep["forkNameTaken"]
    assert taken["isError"] and "already exists" in taken["text"] and "mcp-snap" in taken["text"], taken
