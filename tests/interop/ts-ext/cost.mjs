// What a pi TypeScript extension costs pith (docs/extensions.md, "Cost"), beside pi 1.6.0's cold
// start with the same extension: start-up to the first `get_state` answer, the first prompt's wait
// (sent at once; its `agent_start`, which waits for the node host to have loaded the extensions),
// and the node host's resident memory after that first prompt. Medians of --runs (default 15).
//
//   node tests/interop/ts-ext/cost.mjs --pith target/release/pith [--runs 15] [--no-pi]
//
// node 22 first in PATH (the host's node). The fake LLM answers the prompt (lib/fake-llm.mjs).

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
	const t0 = performance.now();
	const child =
		agent === "pith"
			? spawn(o.pith, [...args, "--compat", "1.6"], { cwd: world.cwd, stdio: ["pipe", "pipe", "ignore"] })
			: spawn(process.execPath, [path.join(PI["1.6"].pkg, PI["1.6"].cli), ...args], { cwd: world.cwd, stdio: ["pipe", "pipe", "ignore"] });
	const r = {};
	let buf = "";
	await new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`${agent}: no answer`)), 60000);
		child.stdout.on("data", (d) => {
			buf += d;
			let i;
			while ((i = buf.indexOf("\n")) >= 0) {
				const line = buf.slice(0, i);
				buf = buf.slice(i + 1);
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

console.log(`load average ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}; ${o.runs} runs each; medians`);
console.log("agent  extension              first get_state   prompt's agent_start   node host RSS   agent RSS");
for (const agent of ["pith", ...(o.pi ? ["pi"] : [])]) {
	for (const [name, exts] of Object.entries(EXTENSIONS)) {
		process.env.TMPDIR = BASE_TMP;
		const world = await makeWorld({ version: "1.6", agent, pith: o.pith });
		const rs = [];
		try {
			for (let i = 0; i < o.runs; i++) rs.push(await once(agent, exts, world));
		} finally {
			await world.dispose();
		}
		console.log(
			`${agent.padEnd(6)} ${name.padEnd(22)} ${fmt(median(rs.map((r) => r.state)), "ms").padStart(15)}   ${fmt(median(rs.map((r) => r.start)), "ms").padStart(20)}   ${fmt(median(rs.map((r) => r.hostRssKb && r.hostRssKb / 1024)), "MB").padStart(13)}   ${fmt(median(rs.map((r) => r.rssKb / 1024)), "MB").padStart(9)}`,
		);
	}
}
