// pi 0.73.1's own RpcClient (npm @mariozechner/pi-coding-agent, installed by `make interop`)
// drives pith — or, with --agent pi, pi 0.73.1 itself — through every method it exposes.
//
//   node tests/interop/rpc-client-0.73.mjs [--agent pith|pi] [--pith target/debug/pith] [--verbose]

import { Checks, loadRpcClient, makeWorld, parseArgs } from "./lib/harness.mjs";
import { runSuite, WORLD_FILES, WORLD_SETTINGS } from "./lib/suite.mjs";

const opts = parseArgs(process.argv.slice(2));
const RpcClient = await loadRpcClient("0.73");
const world = await makeWorld({ version: "0.73", agent: opts.agent, pith: opts.pith, settings: WORLD_SETTINGS, files: WORLD_FILES });
const checks = new Checks(`interop: pi 0.73.1 RpcClient -> ${opts.agent}`, opts);
try {
	await runSuite({ RpcClient, world, checks });
} finally {
	await world.dispose();
}
process.exit(checks.finish());
