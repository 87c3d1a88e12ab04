// What the interop scripts share: a throw-away world (agent dir, cwd, session dir, a fake LLM),
// the choice of agent (pith, or pi itself to prove the expectations are pi's), and a small
// check runner that reports every check and ends with a non-zero exit on any failure.
//
//   node tests/interop/rpc-client-0.73.mjs [--agent pith|pi] [--pith PATH] [--verbose]
//
// The agent is started by pi's own RpcClient, which always runs `node <cliPath> --mode rpc ...`:
// for pith the cliPath is lib/pith-shim.mjs, which execs the pith binary on the same pipes.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeLlm } from "./fake-llm.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const INTEROP = path.resolve(HERE, "..");
export const PROJECT = path.resolve(INTEROP, "../..");

/** Where `make interop` installs each pi version (tests/interop/deps/<v>/node_modules). */
export const PI = {
	"0.73": {
		pkg: path.join(INTEROP, "deps/073/node_modules/@mariozechner/pi-coding-agent"),
		cli: "dist/cli.js",
	},
	"0.87": {
		pkg: path.join(INTEROP, "deps/087/node_modules/@earendil-works/pi-coding-agent"),
		cli: "dist/bundle/cli.js",
	},
	"1.6": {
		pkg: path.join(INTEROP, "deps/16/node_modules/@earendil-works/pi-coding-agent"),
		cli: "dist/bundle/cli.js",
	},
};

export function parseArgs(argv) {
	const o = { agent: "pith", pith: process.env.PITH_BIN || path.join(PROJECT, "target/debug/pith"), verbose: false };
	for (let i = 0; i < argv.length; i++) {
		if (argv[i] === "--agent") o.agent = argv[++i];
		else if (argv[i] === "--pith") o.pith = argv[++i];
		else if (argv[i] === "--verbose") o.verbose = true;
		else throw new Error(`unknown argument ${argv[i]}`);
	}
	if (o.agent !== "pith" && o.agent !== "pi") throw new Error("--agent must be pith or pi");
	return o;
}

/** The RpcClient class of one pi version, loaded from its installed package. */
export async function loadRpcClient(version) {
	const file = path.join(PI[version].pkg, "dist/modes/rpc/rpc-client.js");
	if (!fs.existsSync(file)) throw new Error(`${file} is missing: run \`make interop\``);
	return (await import(file)).RpcClient;
}

/** The two fake models (provider `fake`, Anthropic Messages API) as pi's models.json has them. */
function modelsJson(url) {
	return {
		providers: {
			fake: {
				baseUrl: url,
				api: "anthropic-messages",
				apiKey: "sk-fake-anthropic-key",
				models: [
					{
						id: "fake-model",
						name: "Fake Model",
						reasoning: true,
						input: ["text", "image"],
						contextWindow: 200000,
						maxTokens: 16384,
						cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
					},
					{
						id: "fake-model-2",
						name: "Fake Model Two",
						reasoning: false,
						input: ["text"],
						contextWindow: 100000,
						maxTokens: 8192,
						cost: { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 },
					},
				],
			},
		},
	};
}

/**
 * A fresh world: temp dirs, the fake LLM, a clean environment (no real keys or config reach the
 * agent: the RpcClient passes process.env on), and the RpcClient options for the chosen agent.
 * `files` are written relative to the world root before the agent starts (e.g. `cwd/.pi/...`,
 * `agent/prompts/...`): that is where fixtures for templates, skills and extensions go.
 */
export async function makeWorld({ version, agent, pith, settings = {}, files = {} }) {
	const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), `pith-interop-${version}-`)));
	const dirs = {};
	for (const d of ["agent", "home", "cwd", "sessions", "tmp"]) {
		dirs[d] = path.join(root, d);
		fs.mkdirSync(dirs[d], { recursive: true });
	}
	const llm = await startFakeLlm();
	fs.writeFileSync(path.join(dirs.agent, "models.json"), JSON.stringify(modelsJson(llm.url), null, 2));
	fs.writeFileSync(path.join(dirs.agent, "settings.json"), JSON.stringify(settings, null, 2));
	fs.writeFileSync(path.join(dirs.cwd, "notes.txt"), "alpha\nbeta\n");
	for (const [rel, text] of Object.entries(files)) {
		const p = path.join(root, rel);
		fs.mkdirSync(path.dirname(p), { recursive: true });
		fs.writeFileSync(p, text);
	}
	const keep = ["PATH", "LANG", "LC_ALL", "TERM"];
	for (const k of Object.keys(process.env)) if (!keep.includes(k)) delete process.env[k];
	Object.assign(process.env, {
		HOME: dirs.home,
		TMPDIR: dirs.tmp,
		PI_CODING_AGENT_DIR: dirs.agent,
		PI_OFFLINE: "1",
		PI_SKIP_VERSION_CHECK: "1",
		PI_TELEMETRY: "0",
	});
	const args = ["--session-dir", dirs.sessions];
	let cliPath;
	const env = {};
	if (agent === "pith") {
		cliPath = path.join(HERE, "pith-shim.mjs");
		env.PITH_INTEROP_BIN = pith;
		if (version !== "0.73") args.push("--compat", version);
	} else {
		cliPath = path.join(PI[version].pkg, PI[version].cli);
	}
	return {
		root,
		...dirs,
		llm,
		version,
		agent,
		clientOptions: { cliPath, cwd: dirs.cwd, env, provider: "fake", model: "fake-model", args },
		async dispose() {
			await llm.close();
			fs.rmSync(root, { recursive: true, force: true });
		},
	};
}

/** RpcClient's own plumbing, not part of what a host calls. */
const INTERNAL = new Set(["constructor", "handleLine", "send", "getData", "createProcessExitError", "rejectPendingRequests"]);

/**
 * Record which of the client's public methods get called (wrapping its prototype), so a suite can
 * prove it drove every method the client exposes — and fails when a new client version adds one.
 */
export function trackMethods(RpcClient) {
	const called = new Set();
	const all = Object.getOwnPropertyNames(RpcClient.prototype).filter(
		(n) => !INTERNAL.has(n) && typeof RpcClient.prototype[n] === "function",
	);
	for (const name of all) {
		const original = RpcClient.prototype[name];
		RpcClient.prototype[name] = function (...args) {
			called.add(name);
			return original.apply(this, args);
		};
	}
	return { all, called };
}

// ---- checks -----------------------------------------------------------------------------------

export class Checks {
	constructor(title, { verbose = false, agent = "pith" } = {}) {
		this.title = title;
		this.verbose = verbose;
		this.agent = agent;
		this.passed = 0;
		this.failed = [];
		this.pendingHits = [];
	}

	/** Run one named check; a thrown error is a failure (reported, the run goes on). */
	async check(name, fn) {
		try {
			await fn();
			this.passed++;
			if (this.verbose) console.log(`  ok   ${name}`);
		} catch (e) {
			this.failed.push(name);
			console.log(`  FAIL ${name}\n       ${String(e && e.stack ? e.stack : e).split("\n").slice(0, 6).join("\n       ")}`);
		}
	}

	/**
	 * A check pith is known not to pass yet (the feature belongs to a branch that has not landed):
	 * against pith a failure is reported as PENDING, and a pass is a failure ("remove it from the
	 * pending list"), so the list cannot go stale. Against pi it is an ordinary check.
	 */
	async pending(name, reason, fn) {
		if (this.agent !== "pith") return this.check(name, fn);
		try {
			await fn();
			this.failed.push(name);
			console.log(`  FAIL ${name}: passes now, remove it from the pending list (${reason})`);
		} catch (e) {
			this.pendingHits.push(name);
			console.log(`  PENDING ${name}: ${reason} (${String(e && e.message ? e.message : e).split("\n")[0]})`);
		}
	}

	/** Print the summary; returns the exit code. */
	finish() {
		const pend = this.pendingHits.length ? `, ${this.pendingHits.length} pending` : "";
		if (this.failed.length) {
			console.log(`${this.title}: ${this.failed.length} FAILED, ${this.passed} passed${pend}`);
			return 1;
		}
		console.log(`${this.title}: all ${this.passed} checks passed${pend}`);
		return 0;
	}
}

export function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

/** Resolve with the first event matching `pred` (reject after `timeout` ms). */
export function nextEvent(client, pred, timeout = 20000) {
	return new Promise((resolve, reject) => {
		const timer = setTimeout(() => {
			off();
			reject(new Error("timeout waiting for an event"));
		}, timeout);
		let done = false;
		// Unsubscribe after the current event: RpcClient iterates its listener array while a
		// listener that removes itself at once would make it skip the next listener.
		const off0 = client.onEvent((e) => {
			if (!done && pred(e)) {
				done = true;
				clearTimeout(timer);
				setImmediate(off0);
				resolve(e);
			}
		});
		const off = () => setImmediate(off0);
	});
}

/** Collect every event until (and including) the first one matching `pred`. */
export function eventsUntil(client, pred, timeout = 20000) {
	return new Promise((resolve, reject) => {
		const seen = [];
		const timer = setTimeout(() => {
			off();
			reject(new Error(`timeout; events so far: ${seen.map((e) => e.type).join(",")}`));
		}, timeout);
		let done = false;
		const off0 = client.onEvent((e) => {
			if (done) return;
			seen.push(e);
			if (pred(e)) {
				done = true;
				clearTimeout(timer);
				setImmediate(off0);
				resolve(seen);
			}
		});
		const off = () => setImmediate(off0);
	});
}

export function textOf(message) {
	if (!message) return undefined;
	if (typeof message.content === "string") return message.content;
	return (message.content ?? [])
		.filter((b) => b.type === "text")
		.map((b) => b.text)
		.join("");
}

/** The session file's entries (header first), as a host reading it would see them. */
export function readSessionFile(file) {
	return fs
		.readFileSync(file, "utf8")
		.split("\n")
		.filter((l) => l.trim())
		.map((l) => JSON.parse(l));
}

// A rejected promise nobody awaited any more (a check already failed) must not end the run.
process.on("unhandledRejection", (e) => {
	console.log(`  (late rejection: ${String(e && e.message ? e.message : e).split("\n")[0]})`);
});
