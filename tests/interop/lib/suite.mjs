// The interop suite: one RpcClient drives one agent through every method the client exposes,
// in the order a host would use them, and checks each answer the way a host relies on it. The
// same steps run against pith and (with --agent pi) against pi itself; what differs between the
// pi versions (0.73, 0.87, 1.6) is switched on `version`, never on the agent.
//
// To extend `getCommands` when prompt templates, skills or extensions land: put the fixture files
// in WORLD_FILES (paths relative to the world root: `cwd/.pi/prompts/x.md`, `agent/skills/...`)
// and their command names in EXPECTED_COMMANDS.

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { eventsUntil, nextEvent, readSessionFile, sleep, textOf, trackMethods } from "./harness.mjs";

/**
 * Files written into the world before the agent starts (templates, skills, extensions). In the
 * config dir: pi 0.87 loads a project's `.pi` resources only for a trusted project.
 */
export const WORLD_FILES = {
	"agent/prompts/review.md": "---\ndescription: Review a file\n---\nReview $1 carefully ($@)\n",
	"agent/skills/demo/SKILL.md": "---\nname: demo\ndescription: A demo skill.\n---\n# Demo\n\nSay hi.\n",
};
/** `get_commands` names expected from WORLD_FILES (sorted). */
export const EXPECTED_COMMANDS = ["review", "skill:demo"];
/** Settings of the world: keep almost nothing at compaction so a short session really compacts. */
export const WORLD_SETTINGS = { compaction: { keepRecentTokens: 5 } };

/** Messages a host shows (0.87's role:"system" prompt checkpoints left out). */
const shown = (messages) => messages.filter((m) => m.role !== "system");
const roles = (messages) => shown(messages).map((m) => m.role);
const lastAssistant = (messages) => [...messages].reverse().find((m) => m.role === "assistant");

/**
 * Run the suite. `extra(c, checks)` runs version-specific steps (0.87's new methods) at the point
 * where the session holds a small conversation.
 */
export async function runSuite({ RpcClient, world, checks, extra }) {
	const { version } = world;
	// 0.87 and later: `agent_settled` after the last `agent_end` of a run.
	const since087 = version !== "0.73";
	const v16 = version === "1.6";
	const settledType = since087 ? "agent_settled" : "agent_end";
	const methods = trackMethods(RpcClient);
	const c = new RpcClient(world.clientOptions);
	const events = [];
	c.onEvent((e) => events.push(e));

	await checks.check("start", async () => {
		await c.start();
	});

	let sessionFile;
	await checks.check("getState: the start-up state", async () => {
		const st = await c.getState();
		assert.equal(st.model.provider, "fake");
		assert.equal(st.model.id, "fake-model");
		assert.equal(st.thinkingLevel, "medium");
		assert.equal(st.isStreaming, false);
		assert.equal(st.isCompacting, false);
		assert.equal(st.steeringMode, "one-at-a-time");
		assert.equal(st.followUpMode, "one-at-a-time");
		assert.equal(st.autoCompactionEnabled, true);
		assert.equal(st.pendingMessageCount, 0);
		assert.equal(typeof st.sessionId, "string");
		assert.equal(path.dirname(st.sessionFile), world.sessions);
		// pith's oh-my-pi extras (seed 003): the interrupt mode in effect is pi's, `wait`.
		if ("interruptMode" in st) assert.equal(st.interruptMode, "wait");
		if ("queuedMessageCount" in st) assert.equal(st.queuedMessageCount, 0);
		sessionFile = st.sessionFile;
	});

	await checks.check("getAvailableModels: the models with a key", async () => {
		const models = await c.getAvailableModels();
		const names = models.map((m) => `${m.provider}/${m.id}`).sort();
		assert.deepEqual(names, ["fake/fake-model", "fake/fake-model-2"]);
		const m = models.find((x) => x.id === "fake-model");
		assert.equal(m.api, "anthropic-messages");
		assert.equal(m.reasoning, true);
		assert.equal(m.contextWindow, 200000);
	});

	await checks.check("promptAndWait: a text reply", async () => {
		const evs = await c.promptAndWait("hello");
		assert.equal(evs[0].type, "agent_start");
		const types = evs.map((e) => e.type);
		for (const t of ["turn_start", "message_start", "message_update", "message_end", "turn_end", "agent_end"]) {
			assert.ok(types.includes(t), `no ${t} event`);
		}
		const end = evs.find((e) => e.type === "agent_end");
		assert.deepEqual(roles(end.messages), ["user", "assistant"]);
		assert.equal(textOf(lastAssistant(end.messages)), "echo: hello");
		assert.equal(lastAssistant(end.messages).stopReason, "stop");
		if (v16) {
			// 1.x: the run ends with agent_settled{aborted:false}; assistant messages carry the
			// request's duration, the thinking level they ran at and the provider-cost flag.
			assert.deepEqual(evs[evs.length - 1], { type: "agent_settled", aborted: false });
			const a = lastAssistant(end.messages);
			assert.equal(typeof a.durationMs, "number");
			assert.equal(a.thinkingLevel, "medium");
			assert.equal(a.usage.cost.totalFromProvider, false);
		}
	});

	await checks.check("getLastAssistantText", async () => {
		assert.equal(await c.getLastAssistantText(), "echo: hello");
	});

	await checks.check("getMessages: the context", async () => {
		const msgs = await c.getMessages();
		assert.deepEqual(roles(msgs), ["user", "assistant"]);
		assert.equal(textOf(shown(msgs)[0]), "hello");
	});

	await checks.check("prompt + waitForIdle: a tool call", async () => {
		const seen = eventsUntil(c, (e) => e.type === settledType);
		const idle = c.waitForIdle();
		await c.prompt("[[bash:echo tool-out]]");
		await idle;
		const evs = await seen;
		const start = evs.find((e) => e.type === "tool_execution_start");
		assert.equal(start.toolName, "bash");
		assert.deepEqual(start.args, { command: "echo tool-out" });
		const end = evs.find((e) => e.type === "tool_execution_end");
		assert.equal(end.isError, false);
		assert.equal(textOf(end.result), "tool-out\n");
		if (v16) {
			// 1.x: the tool's duration and bash's structured result.
			assert.equal(typeof end.durationMs, "number");
			const { wall_time_seconds: wall, ...sc } = end.result.structuredContent;
			assert.deepEqual(sc, { output: "tool-out\n", truncated: false, exit_code: 0 });
			assert.equal(typeof wall, "number");
			const result = evs.find((e) => e.type === "message_end" && e.message.role === "toolResult").message;
			assert.equal(typeof result.durationMs, "number");
		}
		assert.equal(await c.getLastAssistantText(), "done: tool-out");
	});

	await checks.check("setThinkingLevel / cycleThinkingLevel", async () => {
		await c.setThinkingLevel("high");
		assert.equal((await c.getState()).thinkingLevel, "high");
		const r = await c.cycleThinkingLevel();
		assert.equal(typeof r.level, "string");
		assert.equal((await c.getState()).thinkingLevel, r.level);
		await c.setThinkingLevel("medium");
		assert.equal((await c.getState()).thinkingLevel, "medium");
	});

	await checks.check("setModel / cycleModel", async () => {
		const m = await c.setModel("fake", "fake-model-2");
		assert.equal(m.id, "fake-model-2");
		let st = await c.getState();
		assert.equal(st.model.id, "fake-model-2");
		assert.equal(st.thinkingLevel, "off");
		const r = await c.cycleModel();
		assert.equal(r.model.id, "fake-model");
		assert.equal(r.isScoped, false);
		assert.equal(typeof r.thinkingLevel, "string");
		st = await c.getState();
		assert.equal(st.model.id, "fake-model");
		await assert.rejects(c.setModel("fake", "no-such-model"), /Model not found: fake\/no-such-model/);
		await c.setThinkingLevel("medium");
	});

	await checks.check("setSteeringMode / setFollowUpMode", async () => {
		await c.setSteeringMode("all");
		await c.setFollowUpMode("all");
		let st = await c.getState();
		assert.equal(st.steeringMode, "all");
		assert.equal(st.followUpMode, "all");
		await c.setSteeringMode("one-at-a-time");
		await c.setFollowUpMode("one-at-a-time");
		st = await c.getState();
		assert.equal(st.steeringMode, "one-at-a-time");
		assert.equal(st.followUpMode, "one-at-a-time");
	});

	await checks.check("setAutoCompaction / setAutoRetry / abortRetry (nothing to abort)", async () => {
		await c.setAutoCompaction(false);
		assert.equal((await c.getState()).autoCompactionEnabled, false);
		await c.setAutoCompaction(true);
		assert.equal((await c.getState()).autoCompactionEnabled, true);
		await c.setAutoRetry(false);
		await c.setAutoRetry(true);
		await c.abortRetry();
	});

	await checks.check("bash", async () => {
		const r = await c.bash("echo hi");
		assert.equal(r.output, "hi\n");
		assert.equal(r.exitCode, 0);
		assert.equal(r.cancelled, false);
		assert.equal(r.truncated, false);
	});

	await checks.check("bash twice at once: both run and are answered", async () => {
		const [a, b] = await Promise.all([c.bash("sleep 0.4; echo one"), c.bash("echo two")]);
		assert.equal(a.output, "one\n");
		assert.equal(b.output, "two\n");
		assert.equal(a.exitCode, 0);
		assert.equal(b.exitCode, 0);
		// Each is recorded on its own, in the order they finished.
		const cmds = (await c.getMessages()).filter((m) => m.role === "bashExecution").map((m) => m.command);
		assert.deepEqual(cmds, ["echo hi", "echo two", "sleep 0.4; echo one"]);
	});

	await checks.check("abortBash", async () => {
		const t0 = Date.now();
		const running = c.bash("sleep 8; echo never");
		await sleep(300);
		await c.abortBash();
		const r = await running;
		assert.equal(r.cancelled, true);
		assert.equal(r.exitCode, undefined);
		assert.ok(Date.now() - t0 < 6000, "abort_bash did not stop the command");
	});

	await checks.check("steer and followUp while streaming", async () => {
		const seen = eventsUntil(c, (e) => e.type === settledType);
		await c.prompt("[[slow:250]] long one");
		await nextEvent(c, (e) => e.type === "message_update");
		await c.steer("steer-1");
		await c.followUp("follow-1");
		const evs = await seen;
		const users = evs.filter((e) => e.type === "message_end" && e.message.role === "user").map((e) => textOf(e.message));
		assert.deepEqual(users, ["[[slow:250]] long one", "steer-1", "follow-1"]);
		const queues = evs.filter((e) => e.type === "queue_update").map((e) => [e.steering, e.followUp]);
		assert.deepEqual(queues, [
			[["steer-1"], []],
			[["steer-1"], ["follow-1"]],
			[[], ["follow-1"]],
			[[], []],
		]);
		assert.equal(await c.getLastAssistantText(), "echo: follow-1");
	});

	await checks.check("steer while tools run: the running tools finish (nothing skipped)", async () => {
		const seen = eventsUntil(c, (e) => e.type === settledType);
		await c.prompt("[[bash:sleep 1; echo slow-tool]] [[bash:echo quick]]");
		await nextEvent(c, (e) => e.type === "tool_execution_start");
		await sleep(150);
		await c.steer("stop now");
		const evs = await seen;
		const ends = evs.filter((e) => e.type === "tool_execution_end");
		assert.equal(ends.length, 2);
		assert.deepEqual(
			ends.map((e) => [e.isError, textOf(e.result)]).sort(),
			[
				[false, "quick\n"],
				[false, "slow-tool\n"],
			],
		);
		const users = evs.filter((e) => e.type === "message_end" && e.message.role === "user").map((e) => textOf(e.message));
		assert.deepEqual(users, ["[[bash:sleep 1; echo slow-tool]] [[bash:echo quick]]", "stop now"]);
		assert.equal(await c.getLastAssistantText(), "echo: stop now");
	});

	await checks.check("abort while streaming", async () => {
		const seen = eventsUntil(c, (e) => e.type === (v16 ? "agent_settled" : "agent_end"));
		await c.prompt("[[slow:300]] abort me");
		await nextEvent(c, (e) => e.type === "message_update");
		await c.abort();
		const evs = await seen;
		const end = evs.find((e) => e.type === "agent_end");
		assert.equal(lastAssistant(end.messages).stopReason, "aborted");
		// 1.x: the settle says the run was aborted.
		if (v16) assert.deepEqual(evs[evs.length - 1], { type: "agent_settled", aborted: true });
		assert.equal((await c.getState()).isStreaming, false);
	});

	await checks.check("abortRetry during an auto-retry delay", async () => {
		const retry = nextEvent(c, (e) => e.type === "auto_retry_start");
		const ended = nextEvent(c, (e) => e.type === "auto_retry_end");
		const settled = since087 ? nextEvent(c, (e) => e.type === "agent_settled") : null;
		await c.prompt("[[fail:529]] overloaded");
		const start = await retry;
		assert.equal(start.attempt, 1);
		await c.abortRetry();
		const end = await ended;
		assert.equal(end.success, false);
		assert.equal(end.finalError, "Retry cancelled");
		// pi 1.6.0 settles with aborted:false after abort_retry (docs/rpc.md: a host should know).
		if (v16) assert.deepEqual(await settled, { type: "agent_settled", aborted: false });
		else if (settled) await settled;
		await sleep(100);
		assert.equal((await c.getState()).isStreaming, false);
	});

	if (extra) await extra(c, checks);

	let live;
	await checks.check("compact, then the context rebuilt from the file equals the live one", async () => {
		const r = await c.compact("Keep it short");
		// (0.87 appends the read/modified file lists to the summary)
		assert.ok(r.summary.startsWith("## Goal\nFake summary."), r.summary);
		assert.equal(typeof r.firstKeptEntryId, "string");
		assert.equal(typeof r.tokensBefore, "number");
		assert.deepEqual(Object.keys(r.details).sort(), ["modifiedFiles", "readFiles"]);
		assert.equal(shown(await c.getMessages())[0].role, "compactionSummary");
		await c.promptAndWait("after compaction");
		live = await c.getMessages();
		assert.equal((await c.getState()).messageCount, live.length);
		await c.newSession();
		assert.equal(shown(await c.getMessages()).length, 0);
		await c.switchSession(sessionFile);
		const rebuilt = await c.getMessages();
		assert.deepEqual(roles(rebuilt), roles(live));
		assert.deepEqual(rebuilt.map(textOf), live.map(textOf));
		assert.equal((await c.getState()).messageCount, live.length);
	});

	await checks.check("getSessionStats", async () => {
		const s = await c.getSessionStats();
		assert.equal(s.sessionFile, sessionFile);
		assert.equal(s.sessionId, (await c.getState()).sessionId);
		// 0.73 counts the kept context, 0.87 and 1.6 the whole session file.
		const counted =
			since087
				? readSessionFile(sessionFile)
						.filter((e) => e.type === "message")
						.map((e) => e.message)
				: live;
		const count = (role) => counted.filter((m) => m.role === role).length;
		assert.equal(s.userMessages, count("user"));
		assert.equal(s.assistantMessages, count("assistant"));
		assert.equal(s.toolResults, count("toolResult"));
		assert.equal(s.totalMessages, counted.length);
		assert.equal(typeof s.tokens.total, "number");
		assert.equal(typeof s.cost, "number");
	});

	await checks.check("exportHtml", async () => {
		const out = path.join(world.tmp, "export.html");
		const r = await c.exportHtml(out);
		assert.equal(r.path, out);
		const html = fs.readFileSync(out, "utf8");
		assert.match(html, /<html/i);
	});

	await checks.check("setSessionName", async () => {
		await c.setSessionName("  interop session  ");
		assert.equal((await c.getState()).sessionName, "interop session");
		// (an empty name is refused, but setSessionName does not look at the response)
		await c.setSessionName("   ");
		assert.equal((await c.getState()).sessionName, "interop session");
	});

	await checks.check("getForkMessages / fork", async () => {
		const forks = await c.getForkMessages();
		const hello = forks.find((f) => f.text === "hello");
		assert.ok(hello, "no fork message for 'hello'");
		assert.equal(typeof hello.entryId, "string");
		const r = await c.fork(hello.entryId);
		assert.deepEqual(r, { text: "hello", cancelled: false });
		const st = await c.getState();
		assert.notEqual(st.sessionFile, sessionFile);
		assert.equal(shown(await c.getMessages()).length, 0);
		await assert.rejects(c.fork("nope1234"), /Invalid entry ID for forking/);
	});

	await checks.check("clone", async () => {
		await c.switchSession(sessionFile);
		const r = await c.clone();
		assert.deepEqual(r, { cancelled: false });
		const st = await c.getState();
		assert.notEqual(st.sessionFile, sessionFile);
		assert.deepEqual(roles(await c.getMessages()), roles(live));
	});

	await checks.check("switchSession to a file that does not exist: a new session there", async () => {
		const fresh = path.join(world.sessions, "fresh", "new-file.jsonl");
		const r = await c.switchSession(fresh);
		assert.deepEqual(r, { cancelled: false });
		const st = await c.getState();
		assert.equal(st.sessionFile, fresh);
		assert.equal(shown(await c.getMessages()).length, 0);
		assert.equal(st.sessionName, undefined);
		await c.promptAndWait("first in the new file");
		const entries = readSessionFile(fresh);
		assert.equal(entries[0].type, "session");
		assert.equal(entries[0].id, (await c.getState()).sessionId);
		const msgs = entries.filter((e) => e.type === "message" && e.message.role !== "system").map((e) => e.message.role);
		assert.deepEqual(msgs, ["user", "assistant"]);
	});

	await checks.check("newSession (with a parent)", async () => {
		const r = await c.newSession(sessionFile);
		assert.deepEqual(r, { cancelled: false });
		const st = await c.getState();
		assert.notEqual(st.sessionFile, sessionFile);
		assert.equal(shown(await c.getMessages()).length, 0);
	});

	await checks.check("getCommands", async () => {
		// pi 0.87 lists commands of its built-in inline extensions (`llama`), 1.6 of its built-in
		// extensions (`llama`, `mcp`, source "builtin"): not the world's.
		const all = await c.getCommands();
		const builtin = (x) => x.sourceInfo?.source === "inline" || x.sourceInfo?.source === "builtin";
		const cmds = all.filter((x) => !builtin(x));
		assert.deepEqual(cmds.map((x) => x.name).sort(), EXPECTED_COMMANDS);
		if (v16) {
			const b = all.filter(builtin).map((x) => [x.name, x.source, x.sourceInfo.path, x.sourceInfo.source]);
			assert.deepEqual(b, [
				["llama", "extension", "builtin:llama.cpp", "builtin"],
				["mcp", "extension", "builtin:mcp", "builtin"],
			]);
		}
	});

	await checks.check("prompt: /template and /skill:name expand as pi expands them", async () => {
		await c.promptAndWait("/review notes.txt \"a b\"");
		await c.promptAndWait("/skill:demo  go now ");
		await c.promptAndWait("/nope stays");
		const users = shown(await c.getMessages())
			.filter((m) => m.role === "user")
			.map(textOf)
			.slice(-3);
		// (`world.agent` names the agent under test: the config dir is `<root>/agent`.)
		const skill = path.join(world.root, "agent", "skills", "demo", "SKILL.md");
		assert.deepEqual(users, [
			"Review notes.txt carefully (notes.txt a b)",
			`<skill name="demo" location="${skill}">\nReferences are relative to ${path.dirname(skill)}.\n\n# Demo\n\nSay hi.\n</skill>\n\ngo now`,
			"/nope stays",
		]);
	});

	await checks.check("getStderr", async () => {
		assert.equal(typeof c.getStderr(), "string");
	});

	await checks.check("stop", async () => {
		await c.stop();
	});

	await checks.check("every method of the client was driven", async () => {
		const missed = methods.all.filter((m) => !methods.called.has(m));
		assert.deepEqual(missed, [], `methods never called: ${missed.join(", ")}`);
	});
	return events;
}

/**
 * pi 0.87's methods beyond 0.73.1's client (getAvailableThinkingLevels, clearQueue, getEntries,
 * getTree): run by the 0.87 and 1.6 scripts.
 */
export async function extra087(c, checks) {
	await checks.check("getAvailableThinkingLevels", async () => {
		assert.deepEqual(await c.getAvailableThinkingLevels(), ["off", "minimal", "low", "medium", "high"]);
	});

	await checks.check("clearQueue", async () => {
		const settled = eventsUntil(c, (e) => e.type === "agent_settled");
		await c.prompt("[[slow:200]] queue then clear");
		await nextEvent(c, (e) => e.type === "message_update");
		await c.steer("to be cleared");
		await c.followUp("also cleared");
		const cleared = nextEvent(c, (e) => e.type === "queue_update" && e.steering.length === 0 && e.followUp.length === 0);
		const r = await c.clearQueue();
		assert.deepEqual(r, { steering: ["to be cleared"], followUp: ["also cleared"] });
		await cleared;
		assert.equal((await c.getState()).pendingMessageCount, 0);
		await settled;
	});
	// Whatever clearQueue did, let a run it left behind end before the next step.
	await c.abort().catch(() => {});

	let leafId;
	await checks.check("getEntries", async () => {
		const all = await c.getEntries();
		assert.ok(Array.isArray(all.entries) && all.entries.length > 0);
		assert.equal(all.leafId, all.entries[all.entries.length - 1].id);
		leafId = all.leafId;
		const since = await c.getEntries(all.entries[0].id);
		assert.deepEqual(since.entries, all.entries.slice(1));
		await assert.rejects(c.getEntries("nope1234"), /Entry not found: nope1234/);
	});

	await checks.check("getTree", async () => {
		const tree = await c.getTree();
		assert.ok(Array.isArray(tree.tree) && tree.tree.length >= 1);
		assert.equal(typeof tree.leafId, "string");
		if (leafId) assert.equal(tree.leafId, leafId);
	});
}
