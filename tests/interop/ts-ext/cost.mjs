// What a pi TypeScript extension costs pith (docs/extensions.md, "Cost"), beside pi 1.6.0's cold
// start with the same extension: start-up to the first `get_state` answer, the first prompt's wait
// (sent at once; its `agent_start`, which waits for the node host to have loaded the extensions),
// and the node host's resident memory after that first prompt. Medians of --runs (default 15).
//
//   node tests/interop/ts-ext/cost.mjs --pith target/release/pith [--runs 15] [--no-pi]
//
// node 22 first in PATH (the host's node). The fake LLM answers the prompt (lib/fake-llm.mjs).
// COST_STDERR=1 shows the agents' stderr and their frames.

import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { INTEROP, makeWorld, PI } from "../lib/harness.mjs";

const DEPS = path.join(INTEROP, "deps/ts-ext/node_modules");
const EXTENSIONS = {
	none: [],
	"permission-gate.ts": [path.join(PI["1.6"].pkg, "examples/extensions/permission-gate.ts")],
	"@aliou/pi-processes": [path.join(DEPS, "@aliou/pi-processes/extensions/processes/index.ts")],
};

const o = { pith: undefined, runs: 15, pi: true };
for (let i = 2; i < process.argv.length; i++) {
	const a = process.argv[i];
	if (a === "--pith") o.pith = process.argv[++i];
	else if (a === "--runs") o.runs = Number(process.argv[++i]);
	else if (a === "--no-pi") o.pi = false;
	else throw new Error(`unknown argument ${a}`);
}
if (!o.pith) throw new Error("--pith BIN is required");
o.pith = path.resolve(o.pith);
const BASE_TMP = os.tmpdir();

function rssKb(pid) {
	try {
		const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
		return m ? Number(m[1]) : undefined;
	} catch {
		return undefined;
	}
}

/** The child processes of `pid`, whichever of its threads started them. */
function children(pid) {
	try {
		return fs
			.readdirSync(`/proc/${pid}/task`)
			.flatMap((t) => fs.readFileSync(`/proc/${pid}/task/${t}/children`, "utf8").trim().split(/\s+/))
			.filter(Boolean)
			.map(Number);
	} catch {
		return [];
	}
}

/** One cold start: ms to the get_state answer, ms to the prompt's agent_start, the host's RSS. */
async function once(agent, exts, world) {
	const args = ["--mode", "rpc", "--session-dir", world.sessions, "--provider", "fake", "--model", "fake-model", "--no-session"];
	for (const e of exts) args.push("-e", e);
	// Each world's own environment (makeWorld sets the last one's in process.env).
	const env = { ...process.env, HOME: world.home, TMPDIR: world.tmp, PI_CODING_AGENT_DIR: path.join(world.root, "agent") };
	const spawnOpts = { cwd: world.cwd, env, stdio: ["pipe", "pipe", process.env.COST_STDERR ? "inherit" : "ignore"] };
	const t0 = performance.now();
	const child =
		agent === "pith"
			? spawn(o.pith, [...args, "--compat", "1.6"], spawnOpts)
			: spawn(process.execPath, [path.join(PI["1.6"].pkg, PI["1.6"].cli), ...args], spawnOpts);
	const r = {};
	let buf = "";
	if (process.env.COST_STDERR) child.on("exit", (c, sig) => process.stderr.write(`exit ${agent} ${c} ${sig}\n`));
	child.stdin.on("error", () => {});
	await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`${agent}: no answer`)), 60000);
		child.stdout.on("data", (d) => {
			buf += d;
			let i;
			while ((i = buf.indexOf("\n")) >= 0) {
				const line = buf.slice(0, i);
				buf = buf.slice(i + 1);
				if (process.env.COST_STDERR) process.stderr.write(`${line.slice(0, 200)}\n`);
				let f;
				try {
					f = JSON.parse(line);
				} catch {
					continue;
				}
				if (f.type === "response" && f.id === "s" && r.state === undefined) r.state = performance.now() - t0;
				if (f.type === "agent_start" && r.start === undefined) r.start = performance.now() - t0;
				if (f.type === "agent_settled" || f.type === "agent_end") {
					if (agent === "pith") {
						const host = children(child.pid).find((p) => /node/.test(fs.readFileSync(`/proc/${p}/cmdline`, "utf8")));
						if (host) r.hostRssKb = rssKb(host);
						r.rssKb = rssKb(child.pid);
					} else r.rssKb = rssKb(child.pid);
					clearTimeout(timer);
					resolve();
				}
			}
		});
		child.stdin.write(`${JSON.stringify({ type: "get_state", id: "s" })}\n${JSON.stringify({ type: "prompt", id: "p", message: "hi" })}\n`);
	});
	child.stdin.end();
	await new Promise((res) => child.on("exit", res));
	return r;
}

const median = (xs) => {
	const s = xs.filter((x) => x !== undefined).sort((a, b) => a - b);
	return s.length ? s[Math.floor(s.length / 2)] : undefined;
};
const fmt = (x, unit) => (x === undefined ? "-" : `${x.toFixed(1)} ${unit}`);

console.log(`load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}; ${o.runs} runs each, interleaved; medians`);
console.log("agent  extension              first get_state   prompt's agent_start   node host RSS   agent RSS");
// One world per agent and extension; the runs go round all of them, so that the machine's load
// falls on each alike.
const configs = [];
for (const agent of ["pith", ...(o.pi ? ["pi"] : [])]) {
	for (const [name, exts] of Object.entries(EXTENSIONS)) {
		process.env.TMPDIR = BASE_TMP;
		configs.push({ agent, name, exts, world: await makeWorld({ version: "1.6", agent, pith: o.pith }), rs: [] });
	}
}
try {
	for (let i = 0; i < o.runs; i++) for (const c of configs) c.rs.push(await once(c.agent, c.exts, c.world));
} finally {
	for (const c of configs) await c.world.dispose();
}
for (const { agent, name, rs } of configs) {
	console.log(
		`${agent.padEnd(6)} ${name.padEnd(22)} ${fmt(median(rs.map((r) => r.state)), "ms").padStart(15)}   ${fmt(median(rs.map((r) => r.start)), "ms").padStart(20)}   ${fmt(median(rs.map((r) => r.hostRssKb && r.hostRssKb / 1024)), "MB").padStart(13)}   ${fmt(median(rs.map((r) => r.rssKb / 1024)), "MB").padStart(9)}`,
	);
}
console.log(`load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")} at the end`);
