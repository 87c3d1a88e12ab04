// The Agent Client Protocol's official TypeScript SDK (npm @agentclientprotocol/sdk 2.4.0, its
// stable v1 client app, installed into tests/interop/deps/acp by `make interop`) drives
// `pith --mode acp` on the offline faux provider through: initialize, a new session, a prompt
// with thinking, text and tool calls, edits and writes with a structured diff, cancel mid-stream
// and mid-tool, permissions allowed / rejected / always, two sessions at once, loading a session
// pi's format wrote (with a compaction) and one pith wrote, slash commands, mode and model changes,
// and the client's fs/* and terminal/* methods carrying read, edit and bash.
// The SDK checks every message it receives against the protocol's types.
//
//   node tests/interop/acp/acp-client.mjs [--pith target/debug/pith] [--verbose]

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const project = path.resolve(here, "../../..");
const sdkFile = path.join(here, "../deps/acp/node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js");
if (!fs.existsSync(sdkFile)) {
	console.log("interop: ACP SDK client SKIPPED (not installed in tests/interop/deps/acp; run `make interop` once to install it)");
	process.exit(0);
}
const acp = await import(pathToFileURL(sdkFile).href);

let pith = process.env.PITH_BIN || path.join(project, "target/debug/pith");
let verbose = false;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
	if (argv[i] === "--pith") pith = path.resolve(argv[++i]);
	else if (argv[i] === "--verbose") verbose = true;
	else throw new Error(`unknown argument ${argv[i]}`);
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), "pith-acp-interop-"));
const agentDir = path.join(root, "agent");
const home = path.join(root, "home");
const cwd = path.join(root, "cwd");
for (const d of [agentDir, home, cwd, path.join(agentDir, "prompts")]) fs.mkdirSync(d, { recursive: true });
fs.writeFileSync(path.join(agentDir, "prompts/review.md"), "---\ndescription: Review the code\n---\nReview $1 carefully.");
// A second provider (never contacted) so that the model can change.
fs.writeFileSync(
	path.join(agentDir, "models.json"),
	JSON.stringify({
		providers: {
			fake: {
				baseUrl: "http://127.0.0.1:9",
				api: "anthropic-messages",
				apiKey: "sk-fake",
				models: [{ id: "fake-model", name: "Fake Model", reasoning: false, input: ["text"], contextWindow: 100000, maxTokens: 8192, cost: { input: 1, output: 5, cacheRead: 0, cacheWrite: 0 } }],
			},
		},
	}),
);
const sessionDir = path.join(agentDir, "sessions", `--${cwd.replace(/^[/\\]/, "").replace(/[/\\:]/g, "-")}--`);

let passed = 0;
const failed = [];
async function check(name, fn) {
	try {
		await fn();
		passed++;
		if (verbose) console.log(`  ok   ${name}`);
	} catch (e) {
		failed.push(name);
		console.log(`  FAIL ${name}\n       ${String(e && e.stack ? e.stack : e).split("\n").slice(0, 6).join("\n       ")}`);
	}
}

/**
 * Start pith with a faux script, connect the SDK's client app, run `op(ctx, state)`, close.
 * `state.updates[sessionId]` collects the session's updates; `state.permission` answers
 * `session/request_permission` (default: reject once).
 */
async function withPith(script, extraArgs, op, clientCapabilities = {}) {
	const scriptFile = path.join(root, `faux-${Math.random().toString(36).slice(2)}.jsonl`);
	fs.writeFileSync(scriptFile, script.map((l) => JSON.stringify(l)).join("\n"));
	const child = spawn(pith, ["--mode", "acp", "--model", "faux", "--faux-script", scriptFile, ...extraArgs], {
		cwd,
		env: { PATH: process.env.PATH, HOME: home, PI_CODING_AGENT_DIR: agentDir, TMPDIR: os.tmpdir() },
		stdio: ["pipe", "pipe", "inherit"],
	});
	const state = { updates: {}, asks: [], permission: () => "reject_once", buffers: {}, calls: [] };
	const app = acp
		.client({ name: "pith-interop" })
		.onNotification(acp.methods.client.session.update, ({ params }) => {
			(state.updates[params.sessionId] ??= []).push(params.update);
		})
		.onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
			state.asks.push(params);
			return { outcome: { outcome: "selected", optionId: state.permission(params) } };
		})
		// The editor: its buffers, and a terminal that ran `echo hi`.
		.onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
			state.calls.push(["read", params.path]);
			return { content: state.buffers[params.path] ?? "" };
		})
		.onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
			state.calls.push(["write", params.path]);
			state.buffers[params.path] = params.content;
			return {};
		})
		.onRequest(acp.methods.client.terminal.create, ({ params }) => {
			state.calls.push(["terminal", params.command, ...params.args]);
			return { terminalId: "t1" };
		})
		.onRequest(acp.methods.client.terminal.waitForExit, () => ({ exitCode: 0, signal: null }))
		.onRequest(acp.methods.client.terminal.output, () => ({ output: "hi\n", truncated: false }))
		.onRequest(acp.methods.client.terminal.release, () => ({}))
		.onRequest(acp.methods.client.terminal.kill, () => ({}));
	const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
	const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
	try {
		await app.connectWith(stream, async (ctx) => {
			const init = await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities });
			assert.equal(init.protocolVersion, 1);
			await op(ctx, state);
		});
	} finally {
		child.stdin.end();
		const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
		const code = await exited;
		clearTimeout(timer);
		assert.equal(code, 0, "pith exits 0 when the client closes stdin");
	}
}

const newSession = async (ctx) => (await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] })).sessionId;
const prompt = (ctx, sessionId, text) => ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
const kinds = (us) => us.map((u) => u.sessionUpdate);
const waitFor = async (pred, ms = 5000) => {
	const end = Date.now() + ms;
	while (!pred()) {
		if (Date.now() > end) throw new Error("timed out waiting");
		await new Promise((r) => setTimeout(r, 5));
	}
};

console.log(`interop: ACP TypeScript SDK ${JSON.parse(fs.readFileSync(path.join(path.dirname(sdkFile), "../../../package.json"))).version} client -> pith --mode acp`);
fs.writeFileSync(path.join(cwd, "a.txt"), "hello world\nbye\n");
let written = null;

await check("initialize, session/new, a prompt with thinking, text, an edit and a write: structured diffs", async () => {
	await withPith(
		[
			{ thinking: "Plan.", text: "Editing.", toolCalls: [{ name: "edit", arguments: { path: "a.txt", edits: [{ oldText: "bye", newText: "ciao" }] } }] },
			{ toolCalls: [{ name: "write", arguments: { path: "new.txt", content: "fresh\n" } }] },
			{ text: "Done." },
		],
		[],
		async (ctx, state) => {
			const created = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
			const sid = created.sessionId;
			written = sid;
			assert.equal(created.modes.currentModeId, "default");
			await ctx.request(acp.methods.agent.session.setMode, { sessionId: sid, modeId: "acceptEdits" });
			const r = await prompt(ctx, sid, "fix it");
			assert.equal(r.stopReason, "end_turn");
			const us = state.updates[sid];
			assert.deepEqual(kinds(us).filter((k) => k !== "available_commands_update"), [
				"current_mode_update",
				"agent_thought_chunk",
				"agent_message_chunk",
				"tool_call",
				"tool_call_update",
				"tool_call_update",
				"tool_call",
				"tool_call_update",
				"tool_call_update",
				"agent_message_chunk",
				"usage_update",
			]);
			const diffs = us.filter((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed").map((u) => u.content[0]);
			assert.deepEqual(diffs, [
				{ type: "diff", path: path.join(cwd, "a.txt"), oldText: "hello world\nbye\n", newText: "hello world\nciao\n" },
				{ type: "diff", path: path.join(cwd, "new.txt"), oldText: null, newText: "fresh\n" },
			]);
			const edit = us.find((u) => u.sessionUpdate === "tool_call");
			assert.equal(edit.kind, "edit");
			assert.equal(edit.title, `Edit ${path.join(cwd, "a.txt")}`);
			assert.deepEqual(edit.rawInput, { path: "a.txt", edits: [{ oldText: "bye", newText: "ciao" }] });
			assert.equal(fs.readFileSync(path.join(cwd, "a.txt"), "utf8"), "hello world\nciao\n");
		},
	);
});

await check("permissions: reject once, allow always (remembered), read-only refuses without asking", async () => {
	await withPith(
		[
			{ toolCalls: [{ name: "bash", arguments: { command: "echo one" } }] },
			{ toolCalls: [{ name: "bash", arguments: { command: "echo two" } }] },
			{ toolCalls: [{ name: "bash", arguments: { command: "echo three" } }] },
			{ text: "ok" },
			{ toolCalls: [{ name: "write", arguments: { path: "w.txt", content: "x" } }] },
			{ text: "done" },
		],
		[],
		async (ctx, state) => {
			const sid = await newSession(ctx);
			const answers = ["reject_once", "allow_always"];
			state.permission = () => answers.shift() ?? "reject_once";
			assert.equal((await prompt(ctx, sid, "go")).stopReason, "end_turn");
			assert.equal(state.asks.length, 2, "the third bash is not asked");
			assert.deepEqual(
				state.asks[0].options.map((o) => o.kind),
				["allow_once", "allow_always", "reject_once", "reject_always"],
			);
			assert.equal(state.asks[0].toolCall.kind, "execute");
			const ends = state.updates[sid].filter((u) => u.sessionUpdate === "tool_call_update" && u.status !== "in_progress");
			assert.deepEqual(ends.map((u) => u.status), ["failed", "completed", "completed"]);
			await ctx.request(acp.methods.agent.session.setMode, { sessionId: sid, modeId: "readOnly" });
			assert.equal((await prompt(ctx, sid, "write")).stopReason, "end_turn");
			assert.equal(state.asks.length, 2);
			assert.ok(!fs.existsSync(path.join(cwd, "w.txt")));
		},
	);
});

await check("cancel mid-stream in one of two sessions, then mid-tool", async () => {
	const slow = "x".repeat(160);
	await withPith(
		[{ text: slow, delayMs: 40 }, { toolCalls: [{ name: "bash", arguments: { command: "sleep 5" } }] }, { text: "never" }],
		[],
		async (ctx, state) => {
			const a = await newSession(ctx);
			const b = await newSession(ctx);
			const pa = prompt(ctx, a, "slow");
			const pb = prompt(ctx, b, "slow too");
			await waitFor(() => (state.updates[a] ?? []).some((u) => u.sessionUpdate === "agent_message_chunk"));
			await ctx.notify(acp.methods.agent.session.cancel, { sessionId: a });
			assert.equal((await pa).stopReason, "cancelled");
			assert.equal((await pb).stopReason, "end_turn");
			const text = (sid) => state.updates[sid].filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
			assert.equal(text(b), slow);
			assert.ok(text(a).length < slow.length);
			await ctx.request(acp.methods.agent.session.setMode, { sessionId: a, modeId: "fullAccess" });
			const t0 = Date.now();
			const p = prompt(ctx, a, "run");
			await waitFor(() => state.updates[a].some((u) => u.sessionUpdate === "tool_call_update" && u.status === "in_progress"));
			await ctx.notify(acp.methods.agent.session.cancel, { sessionId: a });
			assert.equal((await p).stopReason, "cancelled");
			assert.ok(Date.now() - t0 < 4000, "the bash was killed");
		},
	);
});

await check("session/load: a session in pi's format with a compaction, and the session pith wrote above", async () => {
	fs.mkdirSync(sessionDir, { recursive: true });
	const fixture = fs.readFileSync(path.join(project, "tests/fixtures/acp/pi-session.jsonl"), "utf8").replaceAll("{CWD}", cwd);
	fs.writeFileSync(path.join(sessionDir, "2026-11-20T10-00-00-000Z_pi.jsonl"), fixture);
	await withPith([{ text: "again" }], [], async (ctx, state) => {
		const id = "0199aaaa-0000-7000-8000-000000000001";
		await ctx.request(acp.methods.agent.session.load, { sessionId: id, cwd, mcpServers: [] });
		const us = state.updates[id];
		assert.ok(us.some((u) => u.sessionUpdate === "agent_message_chunk" && u.content.text.startsWith("[Compaction summary]")));
		assert.equal(us.filter((u) => u.sessionUpdate === "user_message_chunk").length, 2, "the messages before the compaction too");
		assert.ok(written, "the first check ran");
		await ctx.request(acp.methods.agent.session.load, { sessionId: written, cwd, mcpServers: [] });
		const mine = state.updates[written];
		assert.equal(mine.filter((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed").length, 2);
		const list = await ctx.request(acp.methods.agent.session.list, { cwd });
		assert.ok(list.sessions.some((s) => s.sessionId === id));
	});
});

await check("slash commands, model and mode config options", async () => {
	await withPith([{ text: "reviewed" }], [], async (ctx, state) => {
		const created = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
		const sid = created.sessionId;
		await waitFor(() => (state.updates[sid] ?? []).some((u) => u.sessionUpdate === "available_commands_update"));
		const cmds = state.updates[sid].find((u) => u.sessionUpdate === "available_commands_update").availableCommands;
		assert.deepEqual(cmds.map((c) => c.name), ["review"]);
		assert.equal((await prompt(ctx, sid, "/review main.rs")).stopReason, "end_turn");
		const model = created.configOptions.find((o) => o.id === "model");
		assert.equal(model.currentValue, "faux/faux");
		const r = await ctx.request(acp.methods.agent.session.setConfigOption, { sessionId: sid, configId: "model", value: "fake/fake-model" });
		assert.equal(r.configOptions.find((o) => o.id === "model").currentValue, "fake/fake-model");
		const m = await ctx.request(acp.methods.agent.session.setConfigOption, { sessionId: sid, configId: "mode", value: "readOnly" });
		assert.equal(m.configOptions.find((o) => o.id === "mode").currentValue, "readOnly");
	});
});

await check("client fs and terminal: read, edit and bash go through the editor when it offers to", async () => {
	const file = path.join(cwd, "buf.txt");
	fs.writeFileSync(file, "on disk\n");
	await withPith(
		[
			{ toolCalls: [{ name: "read", arguments: { path: "buf.txt" } }] },
			{ toolCalls: [{ name: "edit", arguments: { path: "buf.txt", edits: [{ oldText: "one", newText: "two" }] } }] },
			{ toolCalls: [{ name: "bash", arguments: { command: "echo hi" } }] },
			{ text: "done" },
		],
		[],
		async (ctx, state) => {
			state.buffers[file] = "buffer one\n";
			const sid = await newSession(ctx);
			await ctx.request(acp.methods.agent.session.setMode, { sessionId: sid, modeId: "fullAccess" });
			assert.equal((await prompt(ctx, sid, "go")).stopReason, "end_turn");
			assert.deepEqual(state.calls, [["read", file], ["read", file], ["write", file], ["terminal", "bash", "-c", "echo hi"]]);
			assert.equal(state.buffers[file], "buffer two\n");
			assert.equal(fs.readFileSync(file, "utf8"), "on disk\n");
			const ends = state.updates[sid].filter((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed");
			assert.deepEqual(ends[0].content, [{ type: "content", content: { type: "text", text: "buffer one\n" } }]);
			assert.deepEqual(ends[1].content, [{ type: "diff", path: file, oldText: "buffer one\n", newText: "buffer two\n" }]);
			assert.deepEqual(ends[2].content[0], { type: "terminal", terminalId: "t1" });
		},
		{ fs: { readTextFile: true, writeTextFile: true }, terminal: true },
	);
});

fs.rmSync(root, { recursive: true, force: true });
console.log(`interop: ACP: ${passed} passed, ${failed.length} failed`);
process.exit(failed.length ? 1 : 0);
