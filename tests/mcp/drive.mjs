// Drives `asb mcp` with the official MCP TypeScript SDK client (pinned in package-lock.json).
// Usage: node drive.mjs SCENARIO stdio ASB_BINARY   |   node drive.mjs SCENARIO http URL
// The asb state directory comes from $ASB_STATE_DIR, the HTTP bearer token from $MCP_TOKEN, the
// warm pool from $MCP_POOL, extra `asb mcp` arguments (stdio) from $MCP_ARGS. Prints one JSON report as its last line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [scenario, kind, target] = process.argv.slice(2);
const report = {};

function transport() {
  if (kind === "stdio")
    return new StdioClientTransport({ command: target, args: ["mcp", ...(process.env.MCP_ARGS || "").split(" ").filter(Boolean)],
                                      env: process.env, stderr: "inherit" });
  const headers = process.env.MCP_TOKEN ? { Authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};
  return new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
}

async function connect() {
  const client = new Client({ name: "asb-mcp-test", version: "1.0.0" });
  await client.connect(transport());
  return client;
}

// A tool result reduced to what tests assert on.
async function call(client, name, args, opts) {
  const r = await client.callTool({ name, arguments: args }, undefined, opts);
  return { isError: !!r.isError, structured: r.structuredContent ?? null,
           text: (r.content || []).map((c) => c.text ?? "").join("") };
}

async function errorOf(p) {
  try { await p; return null; } catch (e) { return { code: e.code ?? null, message: String(e.message ?? e) }; }
}

const scenarios = {
  async tools(client) {
    report.server = client.getServerVersion();
    report.protocol = client.transport?.protocolVersion ?? null;
    report.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, hasOutput: !!t.outputSchema }));
    const created = await call(client, "create_sandbox", { warmpool: process.env.MCP_POOL, sandbox_ready_timeout: 60 });
    report.create = created;
    const name = created.structured?.sandbox_claim_name;
    const sb = { sandbox_claim_name: name };
    report.exec = await call(client, "execute_command", { ...sb, command: "echo out-$((6*7)); echo err >&2; exit 3" });
    report.upload = await call(client, "upload_file", { ...sb, path: "work/hello.txt", content: "hello mcp\n" });
    report.uploadBinary = await call(client, "upload_file", { ...sb, path: "work/bin.dat", content: Buffer.from([0, 255, 1, 128]).toString("base64"), binary: true });
    report.download = await call(client, "download_file", { ...sb, path: "work/hello.txt" });
    report.downloadBinary = await call(client, "download_file", { ...sb, path: "work/bin.dat", binary: true });
    report.downloadNotText = await call(client, "download_file", { ...sb, path: "work/bin.dat" });
    report.list = await call(client, "list_files", { ...sb, path: "work" });
    report.listCapped = await call(client, "list_files", { ...sb, path: "work", max_entries: 1 });
    report.exists = await call(client, "file_exists", { ...sb, path: "work/hello.txt" });
    report.missing = await call(client, "file_exists", { ...sb, path: "work/nope.txt" });
    report.downloadMissing = await call(client, "download_file", { ...sb, path: "work/nope.txt" });
    report.escape = await call(client, "download_file", { ...sb, path: "../../../../etc/shadow" });
    report.bySandboxName = await call(client, "file_exists", { sandbox_claim_name: created.structured?.sandbox_name, path: "work/hello.txt" });
    report.unknown = await call(client, "execute_command", { sandbox_claim_name: "no-such-claim", command: "true" });
    report.unknownPool = await call(client, "create_sandbox", { warmpool: "no-such-pool" });
    report.timeout = await call(client, "execute_command", { ...sb, command: "sleep 30", timeout: 1 });
    report.unknownTool = await errorOf(client.callTool({ name: "no_such_tool", arguments: {} }));
    report.resources = (await client.listResources()).resources.map((r) => r.uri);
    report.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
    report.sandboxes = JSON.parse((await client.readResource({ uri: "asb://sandboxes" })).contents[0].text);
    const fileUri = `asb://sandboxes/default/${created.structured?.sandbox_name}/files/work/hello.txt`;
    report.fileResource = (await client.readResource({ uri: fileUri })).contents[0];
    report.blobResource = (await client.readResource({ uri: fileUri.replace("hello.txt", "bin.dat") })).contents[0];
    report.dirResource = JSON.parse((await client.readResource({ uri: `asb://sandboxes/default/${created.structured?.sandbox_name}/files/work/` })).contents[0].text);
    report.missingResource = await errorOf(client.readResource({ uri: "asb://nothing" }));
    report.delete = await call(client, "delete_sandbox", sb);
    report.deleteAgain = await call(client, "delete_sandbox", sb);
    // Once the sandbox is gone, the handle cached for its name no longer connects: the call
    // resolves the name afresh and says it is unknown.
    for (let i = 0; i < 300; i++) {
      const all = JSON.parse((await client.readResource({ uri: "asb://sandboxes" })).contents[0].text);
      if (!all.sandboxes.some((s) => s.name === created.structured?.sandbox_name)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    report.afterDelete = await call(client, "execute_command", { sandbox_claim_name: created.structured?.sandbox_name, command: "true", timeout: 5 });
  },

  async progress(client) {
    report.createProgress = [];
    const created = await call(client, "create_sandbox", { warmpool: process.env.MCP_POOL, sandbox_ready_timeout: 60 },
      { onprogress: (p) => report.createProgress.push(p) });
    const sb = { sandbox_claim_name: created.structured.sandbox_claim_name };
    const events = [];
    const t0 = Date.now();
    report.result = await call(client, "execute_command",
      { ...sb, command: "for i in 1 2 3 4; do echo line$i; sleep 0.4; done" },
      { onprogress: (p) => events.push({ ...p, at: Date.now() - t0 }), timeout: 60000 });
    report.elapsed = Date.now() - t0;
    report.progress = events;
    report.delete = await call(client, "delete_sandbox", sb);
  },

  async cancel(client) {
    const created = await call(client, "create_sandbox", { warmpool: process.env.MCP_POOL, sandbox_ready_timeout: 60 });
    const sb = { sandbox_claim_name: created.structured.sandbox_claim_name };
    const ac = new AbortController();
    const t0 = Date.now();
    setTimeout(() => ac.abort("test cancels"), 1500);
    report.cancelled = await errorOf(call(client, "execute_command", { ...sb, command: "sleep 6789 & sleep 6788; wait" }, { signal: ac.signal }));
    report.elapsed = Date.now() - t0;
    // The process group is gone: no `sleep 678x` left in the sandbox (the bracket keeps grep's
    // own command line from matching).
    await new Promise((r) => setTimeout(r, 1000));
    report.left = await call(client, "execute_command", { ...sb, command: "grep -l 'sleep 678[89]' /proc/[0-9]*/cmdline 2>/dev/null | wc -l" });
    report.delete = await call(client, "delete_sandbox", sb);
  },

  // snapshot_sandbox and fork_sandbox: a file written before the snapshot is in every fork, one
  // written after it is not; forks are independent of the source and of each other.
  async snapshot(client) {
    report.tools = (await client.listTools()).tools.filter((t) => /snapshot|fork/.test(t.name))
      .map((t) => ({ name: t.name, input: t.inputSchema, output: t.outputSchema ?? null }));
    const created = await call(client, "create_sandbox", { warmpool: process.env.MCP_POOL, sandbox_ready_timeout: 60 });
    const sb = { sandbox_claim_name: created.structured.sandbox_claim_name };
    report.source = created.structured.sandbox_name;
    await call(client, "upload_file", { ...sb, path: "work/before.txt", content: "prepared\n" });
    report.snap = await call(client, "snapshot_sandbox", { ...sb, name: "mcp-snap" });
    report.snapAgain = await call(client, "snapshot_sandbox", { ...sb, name: "mcp-snap" });
    report.snapUnknown = await call(client, "snapshot_sandbox", { sandbox_claim_name: "no-such-claim" });
    report.snapNoName = await call(client, "snapshot_sandbox", {});
    await call(client, "upload_file", { ...sb, path: "work/after.txt", content: "later\n" });
    report.forkFromSnap = await call(client, "fork_sandbox", { snapshot: "mcp-snap", count: 2, name: "mcp-fork" });
    const forks = report.forkFromSnap.structured?.sandbox_names ?? [];
    report.forkFiles = [];
    for (const f of forks)
      report.forkFiles.push(await call(client, "list_files", { sandbox_claim_name: f, path: "work" }));
    if (forks.length > 0) {
      await call(client, "upload_file", { sandbox_claim_name: forks[0], path: "work/mine.txt", content: "x" });
      report.sourceAfterForkWrite = await call(client, "file_exists", { ...sb, path: "work/mine.txt" });
      report.otherForkAfterWrite = await call(client, "file_exists", { sandbox_claim_name: forks[1], path: "work/mine.txt" });
    }
    report.forkNow = await call(client, "fork_sandbox", { ...sb });
    if (report.forkNow.structured)
      report.forkNowAfter = await call(client, "download_file", { sandbox_claim_name: report.forkNow.structured.sandbox_names[0], path: "work/after.txt" });
    report.forkUnknownSnap = await call(client, "fork_sandbox", { snapshot: "no-such-snap" });
    report.forkNothing = await call(client, "fork_sandbox", {});
    report.forkTooMany = await call(client, "fork_sandbox", { snapshot: "mcp-snap", count: 21 });
    report.forkNameTaken = await call(client, "fork_sandbox", { snapshot: "mcp-snap", name: "mcp-fork-1" });
    for (const f of [...forks, ...(report.forkNow.structured?.sandbox_names ?? [])])
      await call(client, "delete_sandbox", { sandbox_claim_name: f });
    await call(client, "delete_sandbox", sb);
  },

  // Claims with the optional arguments; left for the test to inspect (and delete).
  async create(client) {
    report.withOptions = await call(client, "create_sandbox", {
      warmpool: process.env.MCP_POOL, labels: { team: "mcp" }, pod_labels: { "sandbox.users.io/tier": "agents" },
      pod_annotations: { "sandbox.users.io/note": "from-mcp" }, shutdown_after_seconds: 600 });
    report.noShutdown = await call(client, "create_sandbox", {
      warmpool: process.env.MCP_POOL, shutdown_after_seconds: null, sandbox_ready_timeout: 90 });
    report.badLabels = await call(client, "create_sandbox", { warmpool: process.env.MCP_POOL, labels: { n: 1 } });
  },

  async noauth() {
    report.error = await errorOf(connect());
  },

  // A pool with no ready sandbox and a cold start slower than the timeout: the progress says
  // so, and the error tells the agent what to do.
  async coldTimeout(client) {
    report.progress = [];
    report.result = await call(client, "create_sandbox", { warmpool: process.env.MCP_POOL, sandbox_ready_timeout: 1 },
      { onprogress: (p) => report.progress.push(p) });
  },
};

try {
  if (scenario === "noauth") {
    await scenarios.noauth();
  } else {
    const client = await connect();
    await scenarios[scenario](client);
    await client.close();
  }
} catch (e) {
  report.fatal = String(e?.stack ?? e);
}
console.log(JSON.stringify(report));
process.exit(0);
