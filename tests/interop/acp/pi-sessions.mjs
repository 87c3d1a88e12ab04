// Sessions cross between pi and pith over ACP (not part of `make test`: it needs pi-acp and pi
// installed by hand, as bench.mjs): pi 1.6.0 through pi-acp writes a session with a bash call,
// `pith --mode acp` loads it (the whole history replayed) and prompts in it; pith writes one,
// pi-acp + pi load it and prompt in it. Both talk to the interop tests' fake Anthropic server.
//
//   node tests/interop/acp/pi-sessions.mjs <pith> <dir>/node_modules/pi-acp/dist/index.js <pi 1.6.0's `pi`>
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { startFakeLlm } from "../lib/fake-llm.mjs";
const [pith, piAcp, pi] = process.argv.slice(2);
const llm = await startFakeLlm();
const root = fs.mkdtempSync(path.join(os.tmpdir(), "pi-load-"));
const agentDir = path.join(root, "agent"), home = path.join(root, "home"), cwd = path.join(root, "cwd");
for (const d of [agentDir, home, cwd]) fs.mkdirSync(d, { recursive: true });
fs.writeFileSync(path.join(agentDir, "models.json"), JSON.stringify({ providers: { fake: { baseUrl: llm.url, api: "anthropic-messages", apiKey: "sk-fake", models: [{ id: "fake-model", name: "Fake Model", reasoning: false, input: ["text"], contextWindow: 200000, maxTokens: 8192, cost: { input: 3, output: 15, cacheRead: 0, cacheWrite: 0 } }] } } }));
fs.writeFileSync(path.join(agentDir, "settings.json"), JSON.stringify({ defaultProvider: "fake", defaultModel: "fake-model", quietStartup: true }));
const env = { PATH: process.env.PATH, HOME: home, PI_CODING_AGENT_DIR: agentDir, PI_ACP_PI_COMMAND: pi };
function client(cmd, args) {
  const child = spawn(cmd, args, { cwd, env, stdio: ["pipe", "pipe", "inherit"] });
  let buf = ""; const msgs = []; const waiters = []; let next = 0;
  child.stdout.on("data", (d) => { buf += d; let i; while ((i = buf.indexOf("\n")) >= 0) { const l = buf.slice(0, i); buf = buf.slice(i + 1); if (!l.trim()) continue; const m = JSON.parse(l); msgs.push(m);
    if (m.method === "session/request_permission") child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { outcome: { outcome: "selected", optionId: "allow_once" } } }) + "\n");
    for (const w of [...waiters]) if (w.p(m)) { waiters.splice(waiters.indexOf(w), 1); w.r(m); } } });
  const request = (method, params) => { const id = next++; const p = new Promise((r) => waiters.push({ p: (m) => m.id === id && !m.method, r })); child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n"); return p; };
  return { child, msgs, request };
}
const a = client(process.execPath, [piAcp]);
await a.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
const sid = (await a.request("session/new", { cwd, mcpServers: [] })).result.sessionId;
console.log("pi-acp prompt 1:", JSON.stringify((await a.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "run [[bash:echo from-pi]]" }] })).result));
console.log("pi-acp prompt 2:", JSON.stringify((await a.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "thanks" }] })).result));
a.child.stdin.end(); await new Promise((r) => a.child.on("exit", r));
const files = fs.readdirSync(path.join(agentDir, "sessions"), { recursive: true }).filter((f) => f.endsWith(".jsonl"));
console.log("pi wrote:", files);
const b = client(pith, ["--mode", "acp"]);
await b.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
const before = b.msgs.length;
console.log("pith session/load:", JSON.stringify(await b.request("session/load", { sessionId: sid, cwd, mcpServers: [] })).slice(0, 120));
for (const m of b.msgs.slice(before)) if (m.method) console.log("  ", JSON.stringify(m.params.update).slice(0, 160));
console.log("pith prompt in pi's session:", JSON.stringify((await b.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "and now pith" }] })).result));
const psid = (await b.request("session/new", { cwd, mcpServers: [] })).result.sessionId;
await b.request("session/prompt", { sessionId: psid, prompt: [{ type: "text", text: "pith wrote this [[bash:echo from-pith]]" }] });
b.child.stdin.end(); await new Promise((r) => b.child.on("exit", r));
const c = client(process.execPath, [piAcp]);
await c.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
const cb = c.msgs.length;
console.log("pi-acp session/load of pith's session:", JSON.stringify(await c.request("session/load", { sessionId: psid, cwd, mcpServers: [] })).slice(0, 100));
for (const m of c.msgs.slice(cb)) if (m.method) console.log("  ", JSON.stringify(m.params.update).slice(0, 140));
console.log("pi prompt in pith's session:", JSON.stringify((await c.request("session/prompt", { sessionId: psid, prompt: [{ type: "text", text: "and now pi" }] })).result));
c.child.stdin.end(); await new Promise((r) => c.child.on("exit", r));
const lines = fs.readFileSync(path.join(agentDir, "sessions", files[0]), "utf8").trim().split("\n");
console.log("session file now has", lines.length, "lines; last:", lines.at(-1).slice(0, 160));
fs.rmSync(root, { recursive: true, force: true });
process.exit(0);
