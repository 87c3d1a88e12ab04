#!/usr/bin/env python3
"""`make bench`'s tool benchmark: grep, find and ls over a 100,000-file repository, pith beside
pi 0.73.1, pi 0.87.1 and pi 1.6.0 (which spawn ripgrep and fd), through RPC tool calls.

  tests/bench/tools.py [--quick] [--runs N] [--files N] [--oracle DIR] [--pith BIN] [--no-pi]
                       [--also LABEL=BIN]... [--out target/bench/tools.json]

The tree (generated once into target/bench/tree-<files>, reused while its recipe is unchanged)
is a git working copy of a TypeScript monorepo: 50 packages with sources and tests, and per
package an ignored `node_modules/` and `dist/` (root `.gitignore`) and `coverage/` (the
package's own `.gitignore`), plus five 20 MB text files, and for `ls` one directory of 20,200
entries in the ignored root `node_modules/`. Each agent gets the same scripted
turns from the oracle's fake LLM (`fakellm.py`; without the oracle, pith alone is measured with
its own offline `faux` provider playing them): one tool call per turn, every case once per
round, after an untimed whole-tree search that warms the page cache; `--runs` rounds alternate
between the agents so that changes in the machine's load hit both alike. The figure is the wall
time from the `tool_execution_start` line to the `tool_execution_end` line as the driver reads
them (median over the rounds, and min), and the CPU time the agent process and the children it
waited for (rg, fd) spent in between (from /proc, in clock ticks; on a loaded machine the wall
time mostly says how much CPU the scheduler gave each agent); every agent is measured the same way. pi needs `rg`
and `fd` on PATH (as pi would find them); without them, or without the oracle's pi, only pith
is measured. `--also LABEL=BIN` adds another pith build (say, the one before a change).

On a shared machine the figures are noisy: run with other work stopped, or compare medians of
several runs. A benchmark, not a test: nothing is asserted.
"""
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def arg(name, default):
    a = sys.argv[1:]
    return a[a.index(name) + 1] if name in a else default


QUICK = "--quick" in sys.argv
RUNS = int(arg("--runs", "3" if QUICK else "7"))
FILES = int(arg("--files", "100000"))
ORACLE = os.path.abspath(arg("--oracle", os.path.join(ROOT, "..", "shared", "oracle")))
OUT = arg("--out", os.path.join(ROOT, "target", "bench", "tools.json"))
RECIPE = 3  # bump when the tree's recipe changes

CASES = [
    ("grep rare literal (whole tree)", "grep", {"pattern": "needle_handler"}),
    ("grep regex (whole tree)", "grep", {"pattern": "const \\w+_handler = \\d"}),
    ("grep regex, early stop (limit 100)", "grep", {"pattern": "function \\w+_v[0-9]+\\("}),
    ("grep common word (limit 100)", "grep", {"pattern": "import"}),
    ("grep --glob *.spec.ts", "grep", {"pattern": "describe", "glob": "*.spec.ts", "limit": 500}),
    ("find *.json (whole tree)", "find", {"pattern": "*.json"}),
    ("find *.ts (limit 1000)", "find", {"pattern": "*.ts"}),
    ("find src/**/*.spec.ts", "find", {"pattern": "src/**/*.spec.ts", "limit": 5000}),
    ("ls 20,000 entries (limit 500)", "ls", {"path": "node_modules/flat"}),
    ("ls 20,000 entries (all)", "ls", {"path": "node_modules/flat", "limit": 25000}),
]

WORDS = ("const let value result item index count total buffer request response handler agent "
         "session message token stream parse render update config option error state").split()


def text_file(rng, lines):
    out = []
    for i in range(lines):
        k = rng.random()
        if k < 0.15:
            out.append(f"import {{ {rng.choice(WORDS)} }} from './{rng.choice(WORDS)}';")
        elif k < 0.25:
            out.append(f"export function {rng.choice(WORDS)}_v{rng.randrange(100)}(x: number) {{")
        else:
            out.append("  " + " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 12))) + ";")
    return "\n".join(out) + "\n"


def build_tree(root, files):
    """Deterministic: the same recipe always gives the same bytes."""
    rng = random.Random(42)
    os.makedirs(os.path.join(root, ".git"), exist_ok=True)
    with open(os.path.join(root, ".git", "HEAD"), "w") as f:
        f.write("ref: refs/heads/main\n")
    with open(os.path.join(root, ".gitignore"), "w") as f:
        f.write("node_modules/\ndist/\ntarget/\n*.log\n")
    with open(os.path.join(root, "package.json"), "w") as f:
        f.write('{"name": "bench", "private": true}\n')
    count = 3
    big = 5
    per_pkg = (files - count - big) // 50
    # Per package: 45% sources, 5% tests, 30% node_modules, 15% dist, the rest coverage.
    needles = 0
    for p in range(50):
        pkg = os.path.join(root, "packages", f"pkg{p:02d}")
        os.makedirs(pkg)
        with open(os.path.join(pkg, "package.json"), "w") as f:
            f.write(f'{{"name": "pkg{p:02d}", "version": "1.0.{p}"}}\n')
        with open(os.path.join(pkg, ".gitignore"), "w") as f:
            f.write("coverage/\n")
        made = 2
        plan = [("src", int(per_pkg * 0.45), ".ts"), ("tests", int(per_pkg * 0.05), ".spec.ts"),
                ("node_modules", int(per_pkg * 0.30), ".js"), ("dist", int(per_pkg * 0.15), ".js")]
        plan.append(("coverage", per_pkg - made - sum(n for _, n, _ in plan), ".json"))
        for kind, n, ext in plan:
            for i in range(n):
                sub = os.path.join(pkg, kind, f"m{i % 20:02d}")
                if kind == "tests":
                    sub = os.path.join(pkg, "src", "__tests__")
                os.makedirs(sub, exist_ok=True)
                body = text_file(rng, rng.randrange(10, 60))
                if kind == "tests":
                    body = "describe('x', () => {});\n" + body
                if kind == "src" and rng.random() < 0.002:
                    body += "export const needle_handler = 1;\n"
                    needles += 1
                with open(os.path.join(sub, f"f{i:04d}{ext}"), "w") as f:
                    f.write(body)
        count += per_pkg
    data = os.path.join(root, "data")
    os.makedirs(data)
    chunk = text_file(rng, 2000)
    for b in range(big):
        with open(os.path.join(data, f"big{b}.txt"), "w") as f:
            while f.tell() < 20 * 1024 * 1024:
                f.write(chunk)
        count += 1
    return count, needles


def flat_dir(root):
    """`ls`'s case: one directory of 20,000 files and 200 directories, in the root's ignored
    `node_modules/` (grep and find never see it)."""
    flat = os.path.join(root, "node_modules", "flat")
    stamp = os.path.join(root, "node_modules", ".flat-done")
    if os.path.exists(stamp):
        return
    shutil.rmtree(flat, ignore_errors=True)
    os.makedirs(flat)
    rng = random.Random(7)
    words = WORDS + ["Index", "README", "test_utils"]
    for i in range(20000):
        name = (rng.choice(words) + rng.choice(["_", "-", ".", ""]) + str(i)
                + rng.choice([".ts", ".rs", ".json", "", ".d.ts"]))
        open(os.path.join(flat, name), "w").close()
    for i in range(200):
        os.makedirs(os.path.join(flat, f"dir{i}"))
    open(stamp, "w").close()


def tree():
    root = os.path.join(ROOT, "target", "bench", f"tree-{FILES}")
    stamp = os.path.join(root, ".recipe")
    want = f"{RECIPE} {FILES}"
    try:
        with open(stamp) as f:
            if f.read() == want:
                flat_dir(root)
                return root
    except OSError:
        pass
    shutil.rmtree(root, ignore_errors=True)
    t = time.time()
    n, needles = build_tree(root, FILES)
    with open(stamp, "w") as f:
        f.write(want)
    flat_dir(root)
    print(f"tree: {n} files ({needles} with the rare literal) in {time.time() - t:.0f} s: {root}",
          file=sys.stderr)
    return root


def which(name):
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK) and not os.path.isdir(p):
            return p
    return None


def tool_version(path):
    try:
        return subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "?"


def agents():
    found = [("pith", [arg("--pith", os.path.join(ROOT, "target", "release", "pith")), "--mode", "rpc"])]
    # `--also LABEL=BIN` (repeatable): another pith build beside it, e.g. the one before a change.
    a = sys.argv[1:]
    for i, v in enumerate(a[:-1]):
        if v == "--also" and "=" in a[i + 1]:
            label, path = a[i + 1].split("=", 1)
            found.append((label, [path, "--mode", "rpc"]))
    if "--no-pi" in sys.argv:
        return found
    pi = os.path.join(ORACLE, "ref", "node_modules", ".bin", "pi")
    rg, fd = which("rg"), which("fd")
    if not os.access(pi, os.X_OK):
        print(f"skip pi 0.73.1: not installed ({pi})", file=sys.stderr)
    elif not (rg and fd):
        print("skip pi 0.73.1: needs rg and fd on PATH (pip install ripgrep; cargo install fd-find)",
              file=sys.stderr)
    else:
        print(f"pi 0.73.1 runs {tool_version(rg)} ({rg}), {tool_version(fd)} ({fd})", file=sys.stderr)
        if "/shims/" in rg + fd:
            print("  warning: a version-manager shim on PATH adds its own start-up to every pi call;"
                  " put the real binary's directory first", file=sys.stderr)
        found.append(("pi 0.73.1", [pi, "--mode", "rpc"]))
        latest = os.path.join(ORACLE, "ref-latest", "pi")
        if os.access(latest, os.X_OK):
            found.append(("pi 0.87.1", [latest, "--mode", "rpc"]))
        else:
            print(f"skip pi 0.87.1: not installed ({latest})", file=sys.stderr)
        v16 = os.path.join(ORACLE, "ref-1.6", "pi")
        if os.access(v16, os.X_OK):
            found.append(("pi 1.6.0", [v16, "--mode", "rpc"]))
        else:
            print(f"skip pi 1.6.0: not installed ({v16})", file=sys.stderr)
    return found


TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def cpu_ms(pid):
    """CPU time of process `pid` and of its children it has waited for (pi's rg and fd), ms."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) * TICK_MS
    except (OSError, IndexError, ValueError):
        return None


def measure(cmd, root, runs, warm_up):
    """One agent process answering every case `runs` times in a row: {case: [seconds]}."""
    work = tempfile.mkdtemp(prefix="pith-bench-tools-")
    for sub in ("home", "userhome", "tmp"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    # A first, untimed whole-tree search brings the tree into the page cache for this agent.
    turns = [{"tool_calls": [{"name": "grep", "arguments": {"pattern": "warm-up-zzz"}}]}] if warm_up else []
    for _, tool, args in CASES:
        for _ in range(runs):
            turns.append({"tool_calls": [{"name": tool, "arguments": args}]})
    turns.append({"text": "done"})
    srv = None
    if os.path.exists(os.path.join(ORACLE, "fakellm.py")):
        script = os.path.join(work, "script.json")
        with open(script, "w") as f:
            json.dump({"turns": turns}, f)
        srv = subprocess.Popen([sys.executable, os.path.join(ORACLE, "fakellm.py"), "--script", script],
                               stdout=subprocess.PIPE, text=True)
        port = int(srv.stdout.readline().split()[1])
        with open(os.path.join(ORACLE, "config", "models.json.tmpl")) as f:
            models = f.read().replace("{PORT}", str(port))
        with open(os.path.join(work, "home", "models.json"), "w") as f:
            f.write(models)
        provider = ["--provider", "fake", "--model", "fake-model"]
    else:
        # No oracle (so no pi either): pith's own offline provider plays the same turns.
        script = os.path.join(work, "faux.jsonl")
        with open(script, "w") as f:
            for t in turns:
                f.write(json.dumps({"text": t["text"]} if "text" in t else
                                   {"toolCalls": t["tool_calls"]}) + "\n")
        provider = ["--provider", "faux", "--model", "faux", "--faux-script", script]
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": os.path.join(work, "userhome"),
           "PI_CODING_AGENT_DIR": os.path.join(work, "home"), "TMPDIR": os.path.join(work, "tmp"),
           "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    p = subprocess.Popen(cmd + provider + ["--no-session", "--tools", "read,grep,find,ls"],
                         cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    timer = threading.Timer(1800, p.kill)
    timer.start()
    p.stdin.write(b'{"id":"p","type":"prompt","message":"search"}\n')
    p.stdin.flush()
    started, times, sizes, cpus = {}, [], [], []
    warm = [warm_up]
    for line in p.stdout:
        now = time.perf_counter()
        if b'"tool_execution_' not in line[:40]:
            if b'"type":"agent_end"' in line[:40]:
                break
            continue
        ev = json.loads(line)
        if ev["type"] == "tool_execution_start":
            started[ev["toolCallId"]] = (now, cpu_ms(p.pid))
        elif ev["type"] == "tool_execution_end":
            if warm[0]:
                warm[0] = False
                continue
            t0, c0 = started[ev["toolCallId"]]
            c1 = cpu_ms(p.pid)
            times.append(now - t0)
            cpus.append(c1 - c0 if c0 is not None and c1 is not None else None)
            text = "".join(c.get("text", "") for c in ev["result"].get("content", []))
            sizes.append((ev.get("isError", False), text.count("\n") + 1, len(text)))
    timer.cancel()
    p.stdin.close()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
    if srv:
        srv.terminate()
    shutil.rmtree(work, ignore_errors=True)
    out = {}
    for i, (name, _, _) in enumerate(CASES):
        s = sizes[i * runs] if i * runs < len(sizes) else None
        out[name] = {"times": times[i * runs:(i + 1) * runs],
                     "cpus": cpus[i * runs:(i + 1) * runs],
                     "lines": s[1] if s else None, "error": s[0] if s else None}
    return out


def main():
    root = tree()
    found = agents()
    res = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
           "files": FILES, "runs": RUNS, "agents": {}}
    # Rounds alternate between the agents (one process per agent and round, every case once),
    # so a change in the machine's load during the run affects all of them alike.
    for rnd in range(RUNS):
        print(f"== round {rnd + 1}/{RUNS}", file=sys.stderr)
        for label, cmd in found:
            got = measure(cmd, root, 1, warm_up=True)
            agent = res["agents"].setdefault(label, {})
            for name, r in got.items():
                a = agent.setdefault(name, {"times": [], "cpus": [], "lines": r["lines"],
                                            "error": r["error"]})
                a["times"].extend(r["times"])
                a["cpus"].extend(c for c in r["cpus"] if c is not None)
    for agent in res["agents"].values():
        for r in agent.values():
            t = r.pop("times")
            r["median_ms"] = statistics.median(t) * 1000 if t else None
            r["min_ms"] = min(t) * 1000 if t else None
            c = r.pop("cpus")
            r["median_cpu_ms"] = statistics.median(c) if c else None
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(res, f, indent=2)
    labels = list(res["agents"])
    print(f"\n{res['date']}, {res['cpus']} CPUs ({res['machine']}); {FILES} files, median of {RUNS} "
          "(min); tool_execution_start -> tool_execution_end\n")
    others = labels[1:]
    print("| case | " + " | ".join(f"{l} ms" for l in labels) + " | lines |"
          + "".join(f" {l} / pith |" for l in others))
    print("|" + " --- |" * (2 * len(labels) + 1))
    for name, _, _ in CASES:
        cells = []
        for l in labels:
            r = res["agents"][l][name]
            cells.append("" if r["median_ms"] is None else f"{r['median_ms']:.0f} ({r['min_ms']:.0f})")
        lines = "/".join(str(res["agents"][l][name]["lines"]) for l in labels)
        row = f"| {name} | " + " | ".join(cells) + f" | {lines} |"
        a = res["agents"]["pith"][name]["median_ms"]
        for l in others:
            b = res["agents"][l][name]["median_ms"]
            row += f" {b / a:.1f}x |" if a and b else " |"
        print(row)
    # Wall time on a loaded machine mostly says how much CPU the scheduler gave each agent; the
    # CPU time spent (the agent's and its child processes', from /proc, in clock ticks) does not
    # depend on that.
    print(f"\nCPU time of the agent process and its children (rg, fd), median ms "
          f"({TICK_MS:.0f} ms ticks)\n")
    print("| case | " + " | ".join(f"{l} CPU ms" for l in labels) + " |")
    print("|" + " --- |" * (len(labels) + 1))
    for name, _, _ in CASES:
        cells = []
        for l in labels:
            c = res["agents"][l][name].get("median_cpu_ms")
            cells.append("" if c is None else f"{c:.0f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\nfigures: {OUT}")


main()
