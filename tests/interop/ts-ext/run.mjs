// Real pi extensions from the npm registry (tests/interop/deps/ts-ext, pinned, installed by
// `make interop` the way pi installs packages) run through pith's node host and through pi 1.6.0
// itself with the same RPC script: prompts the fake LLM answers with tool calls
// (lib/fake-llm.mjs), the extensions' commands, their dialogs answered. Each step's stdout frames,
// normalised (paths, ids, timestamps, durations), must be the same for both agents; without pi,
// pith's frames are still held to each case's own expectations.
//
//   node tests/interop/ts-ext/run.mjs [--agent pith|pi|both] [--pith target/debug/pith] [--verbose]
//
// Run with node 22 first in PATH (pi 1.6.0 and pith's node host need it): tests/interop/run.sh does.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { INTEROP, makeWorld, PI, PROJECT } from "../lib/harness.mjs";

const DEPS = path.join(INTEROP, "deps/ts-ext/node_modules");
const PI_PKG = PI["1.6"].pkg;

// ---- the cases ------------------------------------------------------------------------------------
// A step sends one command (`prompt` with a message, or any command object) and collects the frames
// until its response and, with `until`, until that event; then until the agent is quiet. `answers`
// are the dialog answers in order (an extension_ui_response without id). `pending` marks a step
// pith is known to differ on (a gap named in the report): a difference is reported, not a failure;
// the same frames are a failure ("passes now"), so the list cannot go stale.

const settled = (f) => f.type === "agent_settled";

const CASES = [
	{
		name: "@aliou/pi-processes@0.12.0",
		what: "the `process` tool (list, start), its bash guard on tool_call (blocks `&`), its settings file, /ps:clear",
		extensions: [path.join(DEPS, "@aliou/pi-processes/extensions/processes/index.ts")],
		// Its guard against background commands is off by default: its settings file turns it on.
		files: { "agent/extensions/processes.json": JSON.stringify({ interception: { blockBackgroundCommands: true } }) },
		steps: [
			{ name: "get_commands", send: { type: "get_commands" } },
			{ name: "a background bash command is blocked", send: { type: "prompt", message: "[[bash:sleep 1 &]]" }, until: settled },
			{ name: "a plain bash command runs", send: { type: "prompt", message: "[[bash:echo plain]]" }, until: settled },
			{
				name: "process list (empty)",
				send: { type: "prompt", message: '[[tool:process:{"action":"list"}]]' },
				until: settled,
			},
			{
				name: "process start (its exit notification off)",
				send: { type: "prompt", message: '[[tool:process:{"action":"start","name":"greeter","command":"echo hello","notify":{"onSuccess":"ignore"}}]]' },
				until: settled,
			},
			{
				name: "process list (the finished one)",
				send: { type: "prompt", message: '[[slow:300]] [[tool:process:{"action":"list"}]]' },
				until: settled,
			},
			{ name: "/ps:clear", send: { type: "prompt", message: "/ps:clear" } },
		],
		expect(steps) {
			const blocked = toolEnd(steps[1]);
			assert.equal(blocked?.isError, true, "the background command is blocked");
			assert.match(textOfResult(blocked), /process/i);
			assert.equal(textOfResult(toolEnd(steps[2])).trim(), "plain");
			assert.equal(toolEnd(steps[3])?.isError, false);
		},
	},
	{
		name: "pi-sync-system-theme@0.2.5",
		what: "its commands in RPC mode (no themes: a notify; a usage warning), its session_start handler, a handler for an event pi 1.6 no longer emits",
		extensions: [path.join(DEPS, "pi-sync-system-theme/index.ts")],
		steps: [
			{ name: "get_commands", send: { type: "get_commands" } },
			{ name: "/system-theme", send: { type: "prompt", message: "/system-theme" } },
			{ name: "/system-theme-push dark", send: { type: "prompt", message: "/system-theme-push dark" } },
			{ name: "a prompt", send: { type: "prompt", message: "hello" }, until: settled },
		],
		expect(steps) {
			assert.ok(
				steps[1].frames.some((f) => f.type === "extension_ui_request" && f.method === "notify"),
				"/system-theme notifies",
			);
			assert.ok(!steps.flatMap((s) => s.frames).some((f) => f.type === "extension_error"), "no extension_error");
		},
	},
	{
		name: "pi-aliases@1.0.7",
		what: "commands /clear (ctx.newSession) and /exit (ctx.shutdown: the agent exits)",
		extensions: [path.join(DEPS, "pi-aliases/src/index.ts")],
		steps: [
			{ name: "get_commands", send: { type: "get_commands" } },
			{ name: "a prompt", send: { type: "prompt", message: "hello" }, until: settled },
			// ctx.newSession(): a new session, empty.
			{ name: "/clear", send: { type: "prompt", message: "/clear" } },
			{ name: "get_messages after /clear (none)", send: { type: "get_messages" } },
			// ctx.shutdown() while idle: the command's response, then the agent exits.
			{ name: "/exit", send: { type: "prompt", message: "/exit" } },
		],
		expect(steps, run) {
			const names = steps[0].frames.find((f) => f.type === "response").data.commands.map((c) => c.name);
			assert.ok(names.includes("clear") && names.includes("exit"), names.join(","));
			assert.deepEqual(run.exitedEarly, { code: 0, signal: null });
		},
	},
	{
		name: "permission-gate.ts (@earendil-works/pi-coding-agent@1.6.0's examples)",
		what: "ctx.ui.select on tool_call for dangerous bash commands: declined, allowed, not asked",
		extensions: [path.join(PI_PKG, "examples/extensions/permission-gate.ts")],
		steps: [
			{ name: "declined", send: { type: "prompt", message: "[[bash:sudo true]]" }, until: settled, answers: [{ value: "No" }] },
			{
				name: "allowed",
				send: { type: "prompt", message: "[[bash:mkdir -p junk && rm -rf junk && echo removed]]" },
				until: settled,
				answers: [{ value: "Yes" }],
			},
			{ name: "not asked", send: { type: "prompt", message: "[[bash:echo safe]]" }, until: settled },
		],
		expect(steps) {
			assert.equal(toolEnd(steps[0])?.isError, true);
			assert.equal(textOfResult(toolEnd(steps[0])), "Blocked by user");
			assert.equal(textOfResult(toolEnd(steps[1])).trim(), "removed");
			assert.ok(!steps[2].frames.some((f) => f.type === "extension_ui_request"));
		},
	},
];

/** The step's first tool result, with its isError. */
function toolEnd(step) {
	const e = step.frames.find((f) => f.type === "tool_execution_end");
	return e && { ...e.result, isError: e.isError };
}

function textOfResult(r) {
	return (r?.content ?? [])
		.filter((b) => b.type === "text")
		.map((b) => b.text)
		.join("");
}

// ---- driving one agent -------------------------------------------------------------------------

const QUIET_MS = 400;
// pi 1.6.0 takes seconds to start on a loaded machine (its first answer waits for the extensions).
const STEP_TIMEOUT_MS = 60000;
// makeWorld points TMPDIR into the world it makes (and removes): each case starts from the first.
const BASE_TMP = os.tmpdir();

async function runCase(kase, agent, pith) {
	process.env.TMPDIR = BASE_TMP;
	const world = await makeWorld({ version: "1.6", agent, pith, files: kase.files ?? {} });
	const args = ["--mode", "rpc", "--session-dir", world.sessions, "--provider", "fake", "--model", "fake-model"];
	for (const e of kase.extensions) args.push("-e", e);
	const child =
		agent === "pith"
			? spawn(pith, [...args, "--compat", "1.6"], { cwd: world.cwd, stdio: ["pipe", "pipe", "pipe"] })
			: spawn(process.execPath, [path.join(PI_PKG, PI["1.6"].cli), ...args], { cwd: world.cwd, stdio: ["pipe", "pipe", "pipe"] });
	let stderr = "";
	child.stderr.on("data", (d) => (stderr += d));
	let buf = "";
	let sink = null; // the running step's collector
	let answers = [];
	let lastFrameAt = Date.now();
	child.stdout.on("data", (d) => {
		buf += d;
		let i;
		while ((i = buf.indexOf("\n")) >= 0) {
			const line = buf.slice(0, i);
			buf = buf.slice(i + 1);
			if (!line.trim()) continue;
			let f;
			try {
				f = JSON.parse(line);
			} catch {
				f = { unparsed: line };
			}
			lastFrameAt = Date.now();
			sink?.(f);
			if (f.type === "extension_ui_request" && ["select", "confirm", "input", "editor"].includes(f.method)) {
				const a = answers.shift() ?? { cancelled: true };
				child.stdin.write(JSON.stringify({ type: "extension_ui_response", id: f.id, ...a }) + "\n");
			}
		}
	});
	let exit = null;
	let exitedEarly = null;
	const exited = new Promise((r) =>
		child.on("exit", (code, signal) => {
			exit = { code, signal };
			r(exit);
		}),
	);
	// An agent an extension shut down no longer reads its input.
	child.stdin.on("error", () => {});
	const results = [];
	try {
		let n = 0;
		for (const step of kase.steps) {
			const id = `step-${++n}`;
			const frames = [];
			answers = [...(step.answers ?? [])];
			let gotResponse = false;
			let gotUntil = !step.until;
			await new Promise((resolve, reject) => {
				const timer = setTimeout(() => {
					sink = null;
					reject(new Error(`${agent}: step "${step.name}" timed out; frames: ${frames.map((f) => f.type).join(",")}\n${stderr.slice(-2000)}`));
				}, STEP_TIMEOUT_MS);
				const poll = setInterval(() => {
					if (gotResponse && gotUntil && Date.now() - lastFrameAt >= QUIET_MS) {
						clearInterval(poll);
						clearTimeout(timer);
						sink = null;
						resolve();
					}
				}, 50);
				sink = (f) => {
					frames.push(f);
					if (f.type === "response" && f.id === id) gotResponse = true;
					if (step.until && step.until(f)) gotUntil = true;
				};
				lastFrameAt = Date.now();
				child.stdin.write(JSON.stringify({ ...step.send, id }) + "\n");
			});
			results.push({ name: step.name, pending: step.pending, frames });
		}
	} finally {
		// Before its input ends: an agent that exited by itself (an extension's ctx.shutdown()).
		exitedEarly = exit;
		child.stdin.end();
		const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
		await exited;
		clearTimeout(timer);
		await world.dispose();
	}
	return { steps: results, stderr, root: world.root, exitedEarly };
}

// ---- normalising -------------------------------------------------------------------------------

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
// @aliou/pi-processes' process ids.
const PROC = /\bproc_[0-9a-z]+\b/g;

function normalise(steps, root) {
	const ids = new Map();
	const rename = (kind, v) => {
		const k = `${kind}:${v}`;
		if (!ids.has(k)) ids.set(k, `<${kind}-${[...ids.keys()].filter((x) => x.startsWith(`${kind}:`)).length + 1}>`);
		return ids.get(k);
	};
	const walk = (v, key, parent) => {
		if (typeof v === "string") {
			let s = v
				.split(root)
				.join("<root>")
				.replace(UUID, (u) => rename("uuid", u))
				.replace(PROC, (u) => rename("proc", u))
				// Temporary directories the extensions make (mkdtemp) and process ids in texts.
				.replace(/(<root>\/tmp\/[\w.-]*-)[A-Za-z0-9]{6}(?![A-Za-z0-9])/g, "$1XXXXXX")
				.replace(/\bpid \d+/g, "pid <n>");
			if (key === "id" && parent?.type === "extension_ui_request") s = rename("ui", v);
			return s;
		}
		if (typeof v === "number") {
			if (["timestamp", "durationMs", "wall_time_seconds", "startTime", "endTime", "pid"].includes(key)) return 0;
			return v;
		}
		if (Array.isArray(v)) return v.map((x) => walk(x, undefined, v));
		if (v && typeof v === "object") {
			const o = {};
			for (const [k, x] of Object.entries(v)) o[k] = walk(x, k, v);
			return o;
		}
		return v;
	};
	return steps.map((s) => ({ ...s, frames: s.frames.map((f) => inherent(walk(f, undefined, undefined))) }));
}

// What differs between pith and pi whatever the extension, for reasons of their own:
// - the system message's `docs` section names pi's documentation tree; pith has none (docs/rpc.md,
//   deviation 12);
// - pi's assistant `message_start` and `message_update` share the partial message its stream goes
//   on filling: when later stream events arrive in the same read, pi prints their content and
//   usage already (a race in pi; pith prints each as it was at that event). The partial's content
//   and usage there are left out: the `assistantMessageEvent`s and `message_end` carry them.
function inherent(f) {
	if (f.type === "message_update" && f.usage) {
		const { usage, ...rest } = f;
		return rest;
	}
	const m = f.message;
	if (f.type === "message_start" && m?.role === "assistant" && m.stopReason === "pending") {
		return { ...f, message: { ...m, content: [] } };
	}
	return eachSystemMessage(f, (sm) => {
		const { docs, ...sections } = sm.sections;
		return { ...sm, sections };
	});
}

/** `fn` applied to every system message (with sections) in a frame, wherever it is. */
function eachSystemMessage(v, fn) {
	if (Array.isArray(v)) return v.map((x) => eachSystemMessage(x, fn));
	if (!v || typeof v !== "object") return v;
	if (v.role === "system" && v.sections && typeof v.sections === "object") return fn(v);
	const o = {};
	for (const [k, x] of Object.entries(v)) o[k] = eachSystemMessage(x, fn);
	return o;
}

// Differences pith knows it has and that are not the extensions' host's (gaps left for later):
// each removes exactly its difference from a frame. A step whose frames agree only once the gaps
// are removed is reported PENDING with the gaps' reasons; a gap that no longer removes anything
// fails the run, so the list cannot go stale.
const GAPS = [];

// ---- comparing ---------------------------------------------------------------------------------

/** Where two values first differ: a JSON path, or undefined when they are the same. */
function diffPath(a, b, at = "") {
	if (JSON.stringify(a) === JSON.stringify(b)) return undefined;
	if (a && b && typeof a === "object" && typeof b === "object" && Array.isArray(a) === Array.isArray(b)) {
		const keys = Array.isArray(a) ? [...Array(Math.max(a.length, b.length)).keys()] : [...new Set([...Object.keys(a), ...Object.keys(b)])];
		if (!Array.isArray(a) && JSON.stringify(Object.keys(a)) !== JSON.stringify(Object.keys(b)) && keys.every((k) => JSON.stringify(a[k]) === JSON.stringify(b[k]))) {
			return `${at} (key order)`;
		}
		for (const k of keys) {
			const d = diffPath(a[k], b[k], `${at}${Array.isArray(a) ? `[${k}]` : `.${k}`}`);
			if (d) return d;
		}
	}
	return `${at}: pith ${JSON.stringify(a) ?? "(none)"} / pi ${JSON.stringify(b) ?? "(none)"}`.slice(0, 600);
}

function firstDifference(a, b) {
	const n = Math.max(a.length, b.length);
	for (let i = 0; i < n; i++) {
		const x = JSON.stringify(a[i]);
		const y = JSON.stringify(b[i]);
		if (x !== y) return { index: i, pith: x ?? "(none)", pi: y ?? "(none)", path: diffPath(a[i], b[i]) };
	}
	return undefined;
}

function parseArgs(argv) {
	const o = { agent: "both", pith: process.env.PITH_BIN || path.join(PROJECT, "target/debug/pith"), verbose: false };
	for (let i = 0; i < argv.length; i++) {
		if (argv[i] === "--agent") o.agent = argv[++i];
		else if (argv[i] === "--pith") o.pith = argv[++i];
		else if (argv[i] === "--verbose") o.verbose = true;
		else throw new Error(`unknown argument ${argv[i]}`);
	}
	return o;
}

const opts = parseArgs(process.argv.slice(2));
if (!fs.existsSync(DEPS)) {
	console.log("interop: ts-ext SKIPPED (not installed: tests/interop/deps/ts-ext; run `make interop` once to install it)");
	process.exit(0);
}
const withPi = opts.agent !== "pith" && fs.existsSync(path.join(PI_PKG, PI["1.6"].cli));
const withPith = opts.agent !== "pi";
if (opts.agent !== "pith" && !withPi) console.log("interop: ts-ext's comparison with pi 1.6.0 SKIPPED (not installed in tests/interop/deps/16)");
let failed = 0;
let passed = 0;
let pending = 0;
const allUsed = [];
let bridgedSteps = 0;
const fail = (msg) => {
	failed++;
	console.log(`  FAIL ${msg}`);
};
for (const kase of CASES) {
	console.log(`interop: ts-ext ${kase.name}: ${kase.what}`);
	const runs = {};
	for (const agent of [withPith && "pith", withPi && "pi"].filter(Boolean)) {
		try {
			const r = await runCase(kase, agent, opts.pith);
			runs[agent] = { ...r, steps: normalise(r.steps, r.root) };
			if (opts.verbose) {
				for (const s of runs[agent].steps) console.log(`  ${agent} ${s.name}:\n    ${s.frames.map((f) => JSON.stringify(f)).join("\n    ")}`);
			}
			kase.expect(runs[agent].steps, runs[agent]);
			passed++;
		} catch (e) {
			fail(`${agent}: ${String(e?.stack ?? e).split("\n").slice(0, 8).join("\n       ")}`);
			if (runs[agent]) console.log(`       stderr: ${runs[agent].stderr.trim().split("\n").slice(-8).join("\n       ")}`);
		}
	}
	if (!runs.pith || !runs.pi) continue;
	const gaps = [...GAPS, ...(kase.gaps ?? [])];
	const used = new Set();
	const bridged = (frames) => frames.map((f) => gaps.reduce((x, g) => g.apply(x), f));
	for (let i = 0; i < kase.steps.length; i++) {
		const a = runs.pith.steps[i];
		const b = runs.pi.steps[i];
		const raw = firstDifference(a.frames, b.frames);
		// Which gaps this step needs: each one that changes a frame of it.
		for (const g of gaps) {
			if ([...a.frames, ...b.frames].some((f) => JSON.stringify(g.apply(f)) !== JSON.stringify(f))) used.add(g);
		}
		const d = firstDifference(bridged(a.frames), bridged(b.frames));
		if (kase.steps[i].pending) {
			if (raw) {
				pending++;
				console.log(`  PENDING ${a.name}: ${kase.steps[i].pending} (frame ${raw.index}: ${raw.path})`);
			} else fail(`${a.name}: same frames as pi now, remove its \`pending\``);
		} else if (d) {
			fail(`${a.name}: frame ${d.index} differs at ${d.path}\n       pith: ${d.pith.slice(0, 400)}\n       pi:   ${d.pi.slice(0, 400)}`);
		} else if (raw) {
			passed++;
			bridgedSteps++;
			if (opts.verbose) console.log(`  same but for known gaps ${a.name} (frame ${raw.index}: ${raw.path.slice(0, 200)})`);
		} else {
			passed++;
			if (opts.verbose) console.log(`  same ${a.name} (${a.frames.length} frames)`);
		}
	}
	for (const g of kase.gaps ?? []) {
		if (!used.has(g)) fail(`the known gap "${g.reason}" changed no frame: remove it from the case`);
	}
	allUsed.push(...used);
}
for (const g of GAPS) {
	if (withPi && withPith && !allUsed.includes(g)) fail(`the known gap "${g.reason}" changed no frame: remove it from GAPS`);
}
for (const g of new Set(allUsed)) console.log(`  known gap (PENDING): ${g.reason}`);
const pend =
	(bridgedSteps ? `; ${bridgedSteps} steps the same only with the known gaps removed` : "") + (pending ? `, ${pending} pending` : "");
if (failed) {
	console.log(`interop: ts-ext: ${failed} FAILED, ${passed} passed${pend}`);
	process.exit(1);
}
console.log(`interop: ts-ext: all ${passed} checks passed${pend}`);
