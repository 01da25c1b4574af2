// Drives acp-server with the official ACP TypeScript SDK (default import: stable ACP v1).
// usage: node drive.mjs SCENARIO HOST:PORT   (token in $ACP_TOKEN, when set)
// Prints one JSON object with what the client saw; tests/integration/test_acp_sdk.py checks it.
import net from "node:net";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [scenario, addr] = process.argv.slice(2);
const i = addr.lastIndexOf(":");
const host = addr.slice(0, i), port = Number(addr.slice(i + 1));
const token = process.env.ACP_TOKEN;

setTimeout(() => { console.error("drive.mjs: timeout"); process.exit(3); }, 90000).unref();

const sock = net.createConnection({ host, port });
await new Promise((ok, fail) => { sock.once("connect", ok); sock.once("error", fail); });
sock.on("close", () => { closed = true; });
let closed = false;
const stream = acp.ndJsonStream(Writable.toWeb(sock), Readable.toWeb(sock));

const updates = {};        // sessionId -> [update]
const permissions = [];    // {sessionId, toolCall, options}
let onPermission = async () => ({ outcome: { outcome: "selected", optionId: "allow_once" } });
let onUpdate = () => {};

function pick(params, kind) {
  const o = params.options.find((x) => x.kind === kind);
  return { outcome: { outcome: "selected", optionId: o.optionId } };
}

const app = acp.client({ name: "asb-acp-test" })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    permissions.push(params);
    return onPermission(params);
  })
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    (updates[params.sessionId] ??= []).push(params.update);
    onUpdate(params);
  });

async function errorOf(p) {
  try { await p; return null; } catch (e) { return { code: e.code, message: e.message }; }
}

const out = { scenario };
await app.connectWith(stream, async (ctx) => {
  const req = (m, p) => ctx.request(m, p);
  out.init = await req("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  if (scenario === "noauth") {
    out.newError = await errorOf(req("session/new", { cwd: "/tmp", mcpServers: [] }));
    out.authError = await errorOf(req("authenticate", { methodId: "asb-token", _meta: { token: "wrong" } }));
    out.newError2 = await errorOf(req("session/new", { cwd: "/tmp", mcpServers: [] }));
    return;
  }
  if (token) await req("authenticate", { methodId: "asb-token", _meta: { token } });
  const newSession = async () => (await req("session/new", { cwd: "/tmp", mcpServers: [] })).sessionId;
  const prompt = (sessionId, text) => req("session/prompt", { sessionId, prompt: [{ type: "text", text }] });

  if (scenario === "basic") {
    const s = await newSession();
    out.sessionId = s;
    out.reflect = await prompt(s, "What is the capital of France?");
    out.run = await prompt(s, "run: uname -a");
  } else if (scenario === "reject") {
    const s = await newSession();
    onPermission = async (p) => pick(p, "reject_once");
    out.run = await prompt(s, "run: uname -a");
    out.sessionId = s;
  } else if (scenario === "always") {
    const s = await newSession();
    onPermission = async (p) => pick(p, "allow_always");
    out.run1 = await prompt(s, "run: echo first");
    out.run2 = await prompt(s, "run: echo second");
    out.sessionId = s;
  } else if (scenario === "cancel-permission") {
    // Cancel while the permission question is open: the client answers "cancelled".
    const s = await newSession();
    onPermission = async () => {
      await ctx.notify("session/cancel", { sessionId: s });
      return { outcome: { outcome: "cancelled" } };
    };
    out.run = await prompt(s, "run: uname -a");
    out.sessionId = s;
  } else if (scenario === "cancel-running") {
    // Cancel while the tool runs inside the sandbox.
    const s = await newSession();
    onUpdate = (p) => {
      if (p.update.sessionUpdate === "tool_call_update" && p.update.status === "in_progress")
        setTimeout(() => ctx.notify("session/cancel", { sessionId: s }), 1000);
    };
    const t0 = Date.now();
    out.run = await prompt(s, "run: sleep 60");
    out.seconds = (Date.now() - t0) / 1000;
    // The session is still usable afterwards.
    onUpdate = () => {};
    out.after = await prompt(s, "run: echo still-here");
    out.sessionId = s;
  } else if (scenario === "parallel") {
    const [a, b] = [await newSession(), await newSession()];
    out.sessions = [a, b];
    out.results = await Promise.all([prompt(a, "run: echo from-a"), prompt(b, "run: echo from-b")]);
  } else if (scenario === "load") {
    const s = process.env.ACP_LOAD_SESSION;
    out.load = await req("session/load", { sessionId: s, cwd: "/tmp", mcpServers: [] });
    out.sessionId = s;
    out.missing = await errorOf(req("session/load", { sessionId: "snotthere0000000", cwd: "/tmp", mcpServers: [] }));
  } else {
    throw new Error("unknown scenario " + scenario);
  }
});
out.updates = updates;
out.permissions = permissions;
sock.end();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
