// Measures `pith --mode acp` beside `pi-acp` + pi (the adapter editors use today): time from
// launch to the `initialize` answer and to the first `agent_message_chunk` of a first prompt,
// and the resident memory of the whole process tree with 1 and with 5 sessions open (each
// after one prompt). Both talk to the interop tests' fake Anthropic server (lib/fake-llm.mjs).
// Not part of `make test` (it needs pi-acp and pi installed by hand):
//
//   npm install pi-acp            # into a scratch dir
//   node tests/interop/acp/bench.mjs --pith target/release/pith \
//        --pi-acp <dir>/node_modules/pi-acp/dist/index.js --pi <pi 1.6.0's `pi`> [--runs 5]

import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeLlm } from "../lib/fake-llm.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const o = { runs: 5 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
	const k = argv[i].replace(/^--/, "");
	o[k] = argv[++i];
}
o.runs = Number(o.runs);

const llm = await startFakeLlm();
const root = fs.mkdtempSync(path.join(os.tmpdir(), "pith-acp-bench-"));
const agentDir = path.join(root, "agent");
const home = path.join(root, "home");
const cwd = path.join(root, "cwd");
for (const d of [agentDir, home, cwd]) fs.mkdirSync(d, { recursive: true });
fs.writeFileSync(
	path.join(agentDir, "models.json"),
	JSON.stringify({
		providers: {
			fake: {
				baseUrl: llm.url,
				api: "anthropic-messages",
				apiKey: "sk-fake",
				models: [{ id: "fake-model", name: "Fake Model", reasoning: false, input: ["text"], contextWindow: 200000, maxTokens: 8192, cost: { input: 3, output: 15, cacheRead: 0, cacheWrite: 0 } }],
			},
		},
	}),
);
fs.writeFileSync(path.join(agentDir, "settings.json"), JSON.stringify({ defaultProvider: "fake", defaultModel: "fake-model", quietStartup: true }));
const env = { PATH: process.env.PATH, HOME: home, PI_CODING_AGENT_DIR: agentDir, TMPDIR: os.tmpdir() };

/** A JSON-RPC client on a spawned agent: request(), and a wait for a message. */
function start(cmd, args, extraEnv) {
	const t0 = process.hrtime.bigint();
	const child = spawn(cmd, args, { cwd, env: { ...env, ...extraEnv }, stdio: ["pipe", "pipe", "ignore"] });
	let buf = "";
	const waiters = [];
	let next = 0;
	child.stdout.on("data", (d) => {
		buf += d;
		let i;
		while ((i = buf.indexOf("\n")) >= 0) {
			const line = buf.slice(0, i);
			buf = buf.slice(i + 1);
			if (!line.trim()) continue;
			const m = JSON.parse(line);
			const at = Number(process.hrtime.bigint() - t0) / 1e6;
			if (m.method === "session/request_permission") {
				child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { outcome: { outcome: "selected", optionId: "allow_once" } } }) + "\n");
			}
			for (const w of [...waiters]) {
				if (w.pred(m)) {
					waiters.splice(waiters.indexOf(w), 1);
					w.resolve({ m, at });
				}
			}
		}
	});
	const wait = (pred) => new Promise((resolve) => waiters.push({ pred, resolve }));
	const request = (method, params) => {
		const id = next++;
		const p = wait((m) => m.id === id && !m.method);
		child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
		return p;
	};
	return { child, wait, request, t0 };
}

/** Resident memory (kB) of a process and all its descendants. */
function treeRss(pid) {
	const kids = new Map();
	for (const d of fs.readdirSync("/proc")) {
		if (!/^\d+$/.test(d)) continue;
		try {
			const stat = fs.readFileSync(`/proc/${d}/stat`, "utf8");
			const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
			if (!kids.has(ppid)) kids.set(ppid, []);
			kids.get(ppid).push(Number(d));
		} catch {}
	}
	let total = 0;
	let procs = 0;
	const stack = [pid];
	while (stack.length) {
		const p = stack.pop();
		try {
			const s = fs.readFileSync(`/proc/${p}/status`, "utf8");
			total += Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0);
			procs++;
		} catch {}
		stack.push(...(kids.get(p) ?? []));
	}
	return { kB: total, procs };
}

async function once(agent, memory) {
	const a = agent.start();
	const init = await a.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
	const sessions = [];
	const opened = await a.request("session/new", { cwd, mcpServers: [] });
	sessions.push(opened.m.result.sessionId);
	const sent = Number(process.hrtime.bigint() - a.t0) / 1e6;
	const chunk = a.wait((m) => m.method === "session/update" && m.params.update.sessionUpdate === "agent_message_chunk");
	const done = a.request("session/prompt", { sessionId: sessions[0], prompt: [{ type: "text", text: "hello" }] });
	const first = await chunk;
	await done;
	const out = { init: init.at, chunk: first.at, chunkAfterPrompt: first.at - sent };
	if (memory) {
		await new Promise((r) => setTimeout(r, 300));
		out.rss1 = treeRss(a.child.pid);
		for (let i = 1; i < 5; i++) {
			const s = (await a.request("session/new", { cwd, mcpServers: [] })).m.result.sessionId;
			await a.request("session/prompt", { sessionId: s, prompt: [{ type: "text", text: `hello ${i}` }] });
		}
		await new Promise((r) => setTimeout(r, 300));
		out.rss5 = treeRss(a.child.pid);
	}
	a.child.stdin.end();
	await new Promise((r) => a.child.on("exit", r));
	return out;
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const agents = [];
if (o.pith) agents.push({ name: "pith --mode acp", start: () => start(o.pith, ["--mode", "acp"], {}) });
if (o["pi-acp"] && o.pi) agents.push({ name: "pi-acp + pi", start: () => start(process.execPath, [o["pi-acp"]], { PI_ACP_PI_COMMAND: o.pi }) });
for (const agent of agents) {
	const runs = [];
	for (let i = 0; i < o.runs; i++) runs.push(await once(agent, i === 0));
	const m = runs[0];
	console.log(
		`${agent.name}: initialize answered ${median(runs.map((r) => r.init)).toFixed(1)} ms after launch; ` +
			`first agent_message_chunk ${median(runs.map((r) => r.chunk)).toFixed(1)} ms after launch ` +
			`(${median(runs.map((r) => r.chunkAfterPrompt)).toFixed(1)} ms after session/prompt was sent; medians of ${o.runs}); ` +
			`RSS 1 session ${(m.rss1.kB / 1024).toFixed(1)} MiB in ${m.rss1.procs} process(es), ` +
			`5 sessions ${(m.rss5.kB / 1024).toFixed(1)} MiB in ${m.rss5.procs}`,
	);
}
llm.server?.close?.();
fs.rmSync(root, { recursive: true, force: true });
process.exit(0);
