#!/usr/bin/env python3
"""Start-up with extensions and MCP servers configured (issue 12): spawn → first `get_state`
response (median and minimum), and spawn → the first prompt's response (which waits until every extension has
registered and every MCP server has listed its tools).

  tests/bench/plugins_startup.py [PITH] [-n RUNS]

Configurations: none; 3 extensions (docs/examples/toolkit.py, protect.sh, a copy of protect.sh)
and 2 MCP servers: the real ones `make interop` installs (server-everything, mcp-server-time)
when present, else two instances of the test server fixtures/mcp/fake_server.py. Medians of RUNS
(default 20). A benchmark, not a test: nothing is asserted.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def measure(pith, settings, runs):
    world = tempfile.mkdtemp(prefix="pith-plugins-bench-")
    agent = os.path.join(world, "agent")
    os.makedirs(agent)
    with open(os.path.join(agent, "settings.json"), "w") as f:
        json.dump(settings, f)
    env = dict(os.environ, PI_CODING_AGENT_DIR=agent)
    first, ready = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.Popen(
            [pith, "--mode", "rpc", "--provider", "faux", "--model", "faux", "--no-session"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=world)
        p.stdin.write(b'{"id":"s","type":"get_state"}\n{"id":"p","type":"prompt","message":"hi"}\n')
        p.stdin.flush()
        for line in p.stdout:
            if b'"id":"s"' in line:
                first.append((time.perf_counter() - t0) * 1000)
            if b'"id":"p"' in line:
                ready.append((time.perf_counter() - t0) * 1000)
                break
        p.stdin.close()
        p.wait()
    shutil.rmtree(world, ignore_errors=True)
    return statistics.median(first), min(first), statistics.median(ready)


def main():
    args = sys.argv[1:]
    runs = 20
    if "-n" in args:
        i = args.index("-n")
        runs = int(args[i + 1])
        del args[i:i + 2]
    pith = args[0] if args else os.path.join(ROOT, "target/release/pith")
    tmp = tempfile.mkdtemp(prefix="pith-plugins-ext-")
    third = os.path.join(tmp, "protect-copy.sh")
    shutil.copy(os.path.join(ROOT, "docs/examples/protect.sh"), third)
    exts = [os.path.join(ROOT, "docs/examples/toolkit.py"),
            os.path.join(ROOT, "docs/examples/protect.sh"), third]
    interop = os.path.join(ROOT, "target/interop-mcp")
    everything = os.path.join(interop, "npm/node_modules/.bin/mcp-server-everything")
    time_server = os.path.join(interop, "venv/bin/mcp-server-time")
    if os.path.exists(everything) and os.path.exists(time_server):
        servers = {"everything": {"command": everything}, "time": {"command": time_server}}
        kind = "server-everything + mcp-server-time"
    else:
        fake = os.path.join(ROOT, "fixtures/mcp/fake_server.py")
        servers = {"a": {"command": "python3", "args": [fake]}, "b": {"command": "python3", "args": [fake]}}
        kind = "2 x fixtures/mcp/fake_server.py (run `make interop` for the real ones)"
    print(f"pith: {pith}; {runs} runs each; load average {os.getloadavg()[0]:.1f}")
    a, m, b = measure(pith, {}, runs)
    print(f"no extensions, no MCP servers:   first get_state {a:6.1f} ms (min {m:.1f}), first prompt answered {b:7.1f} ms")
    a, m, b = measure(pith, {"extensions": exts, "mcpServers": servers}, runs)
    print(f"3 extensions + 2 MCP servers:    first get_state {a:6.1f} ms (min {m:.1f}), first prompt answered {b:7.1f} ms")
    print(f"  (MCP servers: {kind})")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
