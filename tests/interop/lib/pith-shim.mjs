// pi's RpcClient always starts `node <cliPath> --mode rpc ...`. This cliPath runs the pith binary
// named by PITH_INTEROP_BIN on the very same pipes (stdio inherited: pith reads the client's
// stdin and writes its stdout directly), passes signals on, and exits as pith exits.

import { spawn } from "node:child_process";
import os from "node:os";

const bin = process.env.PITH_INTEROP_BIN;
if (!bin) {
	process.stderr.write("pith-shim: PITH_INTEROP_BIN is not set\n");
	process.exit(2);
}
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) {
	process.on(sig, () => child.kill(sig));
}
child.on("error", (e) => {
	process.stderr.write(`pith-shim: cannot start ${bin}: ${e.message}\n`);
	process.exit(127);
});
child.on("exit", (code, signal) => {
	process.exit(code ?? 128 + (os.constants.signals[signal] ?? 0));
});
