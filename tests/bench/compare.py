#!/usr/bin/env python3
"""`make bench`'s comparison: pith beside pi 0.73.1, pi 0.87.1 and pi 1.6.0, as ratios from one run.

  tests/bench/compare.py [--quick] [--pith BIN] [--static BIN] [--oracle DIR] [--out target/bench/results.json]

Agents: target/release/pith (or --pith BIN); the static musl build (`--static BIN`, when that file
exists: `make bench` passes the one `make static` builds), measured as pith is, in a column of
its own ("pith static / pith" is its figure over the glibc build's); and each reference that is
installed in the oracle directory
(`../shared/oracle` by default: `setup.sh` installs pi 0.73.1 into ref/, `setup-latest.sh` pi
0.87.1 into ref-latest/, `setup-1.6.sh` pi 1.6.0 into ref-1.6/). A missing reference is reported
and skipped. The measurements are the
oracle's own harnesses, run the same way for every agent:

- cold start: spawn -> first `get_state` response (bench.py `cold`); the same with 200 skills
  and 200 prompt templates in the config dir, to `get_state` and to `get_commands`; and the
  floor: the same harness starting `bench-floor`, a program that only answers `get_state`;
- idle and peak memory: VmHWM sampled from /proc (not wait4 rusage, which counts the Python
  parent's pages in a forked child): idle after `get_state`, peak over a prompt with a reply;
- first-token latency: first SSE text chunk written -> its `text_delta` line read (bench.py);
- 20,000-chunk stream: wall time and CPU (bench.py `throughput`), pith also with
  `--rpc-partials none`, `--compat 0.87` and `--compat 1.6` (pi 0.87.1 and 1.6.0 stream
  delta-only updates: their ratios are taken against pith speaking their protocol);
- long session: resume a 20,000-entry session, one more turn (the oracle's bench/longsession.py
  session, run by tests/bench/longsession.py, which also marks the request on the wire: the body
  read off the socket, before the fake server parses and logs it), every agent's runs
  interleaved; with the CPU time of the resume and of the turn (wait4), which the machine's load
  does not inflate the way it does wall times;
- density: streaming agents per GiB of PSS (bench/density.py; fewer pi agents, each needs
  ~200 MiB);
- HTML export: `--export` of the 10,000-entry session pith-bench leaves in
  target/bench/export-10k.jsonl (wall time, median of 3; page size);
- grep/find on a 100,000-file tree: from target/bench/tools.json, which tests/bench/tools.py
  writes (`make bench` runs it first): the sum of its cases' medians, and its slowest case;
- 1,000 turns in one process (pith only: pith-bench's `turns` group, target/bench/turns.json):
  pith's CPU per turn fitted to a fixed part plus a part per MB of request, and the largest
  departure of a group of a hundred turns from that line (flat: nothing grows with the number of
  turns beyond what the request holds).

Prints one table (ratio = pi / pith: how many times pith is faster or smaller) and writes the
figures to target/bench/results.json. A benchmark, not a test: nothing is asserted.
"""
import json
import os
import re
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
ORACLE = os.path.abspath(arg("--oracle", os.path.join(ROOT, "..", "shared", "oracle")))
OUT = arg("--out", os.path.join(ROOT, "target", "bench", "results.json"))


def agents():
    found = [("pith", [arg("--pith", os.path.join(ROOT, "target", "release", "pith")), "--mode", "rpc"])]
    static = arg("--static", None)
    if static and os.access(static, os.X_OK):
        found.append(("pith static", [static, "--mode", "rpc"]))
    elif static:
        print(f"skip pith static: not built ({static}; `make static` builds it)", file=sys.stderr)
    for label, path in (("pi 0.73.1", os.path.join(ORACLE, "ref", "node_modules", ".bin", "pi")),
                        ("pi 0.87.1", os.path.join(ORACLE, "ref-latest", "pi")),
                        ("pi 1.6.0", os.path.join(ORACLE, "ref-1.6", "pi"))):
        if os.access(path, os.X_OK):
            found.append((label, [path, "--mode", "rpc"]))
        else:
            print(f"skip {label}: not installed ({path}; see the oracle's setup scripts)", file=sys.stderr)
    return found


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def run(cmd, timeout=1800):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.returncode != 0:
        print(f"  ! {' '.join(cmd[:3])}...: exit {p.returncode}: {p.stderr[-400:]}", file=sys.stderr)
    return p.stdout


def bench_py(label, cmd, only, runs, extra=()):
    slug = "cmp-" + re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
    run([sys.executable, os.path.join(ORACLE, "bench.py"), "--label", slug, "--runs", str(runs),
         "--only", only, *extra, "--", *cmd])
    try:
        with open(os.path.join(ORACLE, "bench", "out", slug, "results.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(cmd):
    """Idle VmHWM after get_state, then peak VmHWM over one prompt answered by the fake LLM."""
    work = tempfile.mkdtemp(prefix="pith-bench-mem-")
    for sub in ("home", "userhome", "cwd", "tmp"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    script = os.path.join(work, "script.json")
    with open(script, "w") as f:
        json.dump({"turns": [], "fallback": {"repeat_text": {"chunk": "tok ", "count": 200}}}, f)
    srv = subprocess.Popen([sys.executable, os.path.join(ORACLE, "fakellm.py"), "--script", script],
                           stdout=subprocess.PIPE, text=True)
    port = int(srv.stdout.readline().split()[1])
    with open(os.path.join(ORACLE, "config", "models.json.tmpl")) as f:
        tmpl = f.read().replace("{PORT}", str(port))
    with open(os.path.join(work, "home", "models.json"), "w") as f:
        f.write(tmpl)
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": os.path.join(work, "userhome"),
           "PI_CODING_AGENT_DIR": os.path.join(work, "home"), "TMPDIR": os.path.join(work, "tmp"),
           "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    p = subprocess.Popen(cmd + ["--provider", "fake", "--model", "fake-model", "--no-session"],
                         cwd=os.path.join(work, "cwd"), env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = [0]
    done = [False]

    def sample():
        while not done[0]:
            peak[0] = max(peak[0], hwm_kib(p.pid))
            time.sleep(0.002)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    idle = None
    p.stdin.write(b'{"id":"s","type":"get_state"}\n')
    p.stdin.flush()
    for line in p.stdout:
        if idle is None and b'"get_state"' in line:
            time.sleep(0.2)
            idle = hwm_kib(p.pid)
            p.stdin.write(b'{"id":"p","type":"prompt","message":"hello"}\n')
            p.stdin.flush()
        elif b'"type":"agent_end"' in line[:40]:
            break
    time.sleep(0.05)
    peak[0] = max(peak[0], hwm_kib(p.pid))
    done[0] = True
    p.stdin.close()
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
    srv.terminate()
    return {"idle_mib": (idle or 0) / 1024, "peak_mib": peak[0] / 1024}


def cold_resources(cmd, runs):
    """Spawn -> first response, with 200 skills and 200 prompt templates in the config dir:
    to `get_state` and to `get_commands` (which lists all 400: pith reads them on first use,
    pi at start-up). Median of `runs`, in ms."""
    work = tempfile.mkdtemp(prefix="pith-bench-res-")
    for sub in ("home", "userhome", "cwd", "tmp"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    body = "Step one: read the relevant files.\nStep two: run the script in scripts/run.sh.\n" * 20
    for i in range(200):
        d = os.path.join(work, "home", "skills", f"skill-{i}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "SKILL.md"), "w") as f:
            f.write(f"---\nname: skill-{i}\ndescription: Does task {i}; use it when the user asks about task {i}.\n"
                    f"metadata:\n  version: \"1.0\"\n---\n# Skill {i}\n\n{body}")
        os.makedirs(os.path.join(work, "home", "prompts"), exist_ok=True)
        with open(os.path.join(work, "home", "prompts", f"t{i}.md"), "w") as f:
            f.write(f"---\ndescription: Template {i}\nargument-hint: \"<file>\"\n---\nReview $1 for task {i}.\n\n{body}")
    with open(os.path.join(ORACLE, "config", "models.json.tmpl")) as f:
        tmpl = f.read().replace("{PORT}", "9")
    with open(os.path.join(work, "home", "models.json"), "w") as f:
        f.write(tmpl)
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": os.path.join(work, "userhome"),
           "PI_CODING_AGENT_DIR": os.path.join(work, "home"), "TMPDIR": os.path.join(work, "tmp"),
           "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    out = {}
    for command in ("get_state", "get_commands"):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd + ["--provider", "fake", "--model", "fake-model", "--no-session"],
                                 cwd=os.path.join(work, "cwd"), env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            p.stdin.write(('{"id":"c","type":"%s"}\n' % command).encode())
            p.stdin.flush()
            line = p.stdout.readline()
            times.append((time.perf_counter() - t0) * 1000)
            p.stdin.close()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
            if b'"success":true' not in line:
                print(f"  ! {command}: {line[:200]!r}", file=sys.stderr)
        times.sort()
        out[command] = times[len(times) // 2]
    return {"cold_res_state_ms": out["get_state"], "cold_res_commands_ms": out["get_commands"]}


def export_html(cmd):
    """`<agent> --export` of pith-bench's 10,000-entry session: median wall ms of 3, page MiB."""
    session = os.path.join(ROOT, "target", "bench", "export-10k.jsonl")
    if not os.path.exists(session):
        return {}
    work = tempfile.mkdtemp(prefix="pith-bench-export-")
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": work, "PI_CODING_AGENT_DIR": work,
           "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    out = os.path.join(work, "page.html")
    times = []
    for _ in range(3):
        t = time.monotonic()
        p = subprocess.run([cmd[0], "--export", session, out], cwd=work, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            return {}
        times.append((time.monotonic() - t) * 1000)
    times.sort()
    return {"export_ms": times[1], "export_page_mib": os.path.getsize(out) / 1048576}


def tools(label):
    """grep/find figures of `label` from tests/bench/tools.py's last run (same machine, run just
    before by `make bench`): total of the medians over its cases, and the slowest case."""
    try:
        with open(os.path.join(ROOT, "target", "bench", "tools.json")) as f:
            cases = json.load(f)["agents"][label]
    except (OSError, ValueError, KeyError):
        return {}
    medians = [c["median_ms"] for c in cases.values() if c.get("median_ms") is not None]
    if not medians or len(medians) < len(cases):
        return {}
    return {"tools_total_ms": sum(medians), "tools_max_ms": max(medians)}


def turns():
    """pith-bench's 1,000 turns in one process (target/bench/turns.json, written by `make bench`
    just before): pith's CPU per turn = fixed + per_mb x request MB, and how far the groups of a
    hundred turns stray from that line (the largest, in ms)."""
    try:
        with open(os.path.join(ROOT, "target", "bench", "turns.json")) as f:
            t = json.load(f)
    except (OSError, ValueError):
        return {}
    spread = max(abs(cpu - t["fixed_ms"] - t["per_mb_ms"] * mb) for mb, cpu in t["groups"])
    return {"turn_fixed_ms": t["fixed_ms"], "turn_per_mb_ms": t["per_mb_ms"], "turn_spread_ms": spread}


def parse_kv(text, prefix):
    for line in text.splitlines():
        if line.startswith(prefix):
            return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", line)}
    return {}


def main():
    found = agents()
    runs = 5 if QUICK else 15
    res = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
           "cpu_model": cpu_model(), "load_start": os.getloadavg()[0], "agents": {}}
    # The long session first, every agent's runs interleaved (each run is a few seconds of pi:
    # run one agent after the other and a change in the machine's load becomes their ratio).
    print("== long session (all agents, interleaved)", file=sys.stderr)
    cmds = []
    for _, cmd in found:
        cmds += ["--", *cmd]
    out = run([sys.executable, os.path.join(ROOT, "tests", "bench", "longsession.py"),
               "--oracle", ORACLE, "--turns", "1000" if QUICK else "5000",
               "--runs", "1" if QUICK else "5", *cmds])
    lines = [l for l in out.splitlines() if l.startswith("longsession:")]
    long_session = {label: parse_kv(l, "longsession:") for (label, _), l in zip(found, lines)}
    # The harness's own share of a cold start: a program that only answers the first get_state
    # (bench-floor, built next to pith by `make bench`), measured the same way.
    floor_bin = os.path.join(os.path.dirname(found[0][1][0]), "bench-floor")
    if os.access(floor_bin, os.X_OK):
        print("== floor (bench-floor)", file=sys.stderr)
        b = bench_py("floor", [floor_bin], "cold", runs)
        res["cold_floor_ms"] = b.get("cold", {}).get("first_get_state_response_ms", {}).get("median")
    for label, cmd in found:
        print(f"== {label}", file=sys.stderr)
        # Both builds of pith get pith's own rows (partials none, 0.87, 1.6, 200 agents).
        pith = label.startswith("pith")
        r = {}
        ls = long_session.get(label, {})
        r["resume_ms"], r["request_ms"] = ls.get("resume_ms"), ls.get("request_ms")
        r["wire_ms"] = ls.get("wire_ms")
        r["longsession_rss_mib"] = ls.get("peak_rss_mib")
        r["resume_cpu_ms"], r["turn_cpu_ms"] = ls.get("resume_cpu_ms"), ls.get("turn_cpu_ms")
        b = bench_py(label, cmd, "cold,latency", runs)
        r["cold_ms"] = b.get("cold", {}).get("first_get_state_response_ms", {}).get("median")
        r["latency_ms"] = b.get("latency", {}).get("first_sse_text_chunk_to_text_delta_line_ms", {}).get("median")
        r.update(memory(cmd))
        r.update(cold_resources(cmd, runs))
        t = bench_py(label, cmd, "throughput", 1, ("--throughput", "20000:tok"))
        t = (t.get("throughput") or [{}])[0]
        r["stream20k_s"] = t.get("prompt_to_agent_end_s") if t.get("completed") else None
        r["stream20k_cpu_s"] = t.get("agent_cpu_s") if t.get("completed") else None
        if pith:
            t = bench_py(label + "-none", cmd + ["--rpc-partials", "none"], "throughput", 1,
                         ("--throughput", "20000:tok"))
            t = (t.get("throughput") or [{}])[0]
            r["stream20k_none_s"] = t.get("prompt_to_agent_end_s")
            # pi 0.87.1 streams delta-only updates: compare it with pith speaking 0.87.
            t = bench_py(label + "-087", cmd + ["--compat", "0.87"], "throughput", 1,
                         ("--throughput", "20000:tok"))
            t = (t.get("throughput") or [{}])[0]
            r["stream20k_087_s"] = t.get("prompt_to_agent_end_s")
            r["stream20k_087_cpu_s"] = t.get("agent_cpu_s")
            # The same for pi 1.6.0 and pith speaking 1.6.
            t = bench_py(label + "-16", cmd + ["--compat", "1.6"], "throughput", 1,
                         ("--throughput", "20000:tok"))
            t = (t.get("throughput") or [{}])[0]
            r["stream20k_16_s"] = t.get("prompt_to_agent_end_s") if t.get("completed") else None
            r["stream20k_16_cpu_s"] = t.get("agent_cpu_s") if t.get("completed") else None
        n = ("50" if QUICK else "200") if pith else "8"
        d = parse_kv(run([sys.executable, os.path.join(ORACLE, "bench", "density.py"), n, "--", *cmd]), "agents=")
        r["agents_per_gib"] = d.get("agents_per_gib")
        r.update(export_html(cmd))
        r.update(tools(label))
        if label == "pith":
            r.update(turns())
        res["agents"][label] = r
        print(json.dumps(r), file=sys.stderr)

    res["load_end"] = os.getloadavg()[0]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(res, f, indent=2)

    rows = [("cold start (ms)", "cold_ms", False),
            ("cold start, 200 skills + 200 templates, to get_state (ms)", "cold_res_state_ms", False),
            ("cold start, 200 skills + 200 templates, to get_commands (ms)", "cold_res_commands_ms", False),
            ("idle memory (MiB)", "idle_mib", False),
            ("peak memory, one turn (MiB)", "peak_mib", False), ("first token (ms)", "latency_ms", False),
            ("20k-chunk stream (s)", "stream20k_s", False), ("20k-chunk stream CPU (s)", "stream20k_cpu_s", False),
            ("20k-chunk stream, partials none (s)", "stream20k_none_s", False),
            ("20k-chunk stream, --compat 0.87 (s)", "stream20k_087_s", False),
            ("20k-chunk stream CPU, --compat 0.87 (s)", "stream20k_087_cpu_s", False),
            ("20k-chunk stream, --compat 1.6 (s)", "stream20k_16_s", False),
            ("20k-chunk stream CPU, --compat 1.6 (s)", "stream20k_16_cpu_s", False),
            ("long session: resume (ms)", "resume_ms", False),
            ("long session: prompt -> request on the wire (ms)", "wire_ms", False),
            ("long session: prompt -> request logged by the fake LLM (ms)", "request_ms", False),
            ("long session: peak RSS (MiB)", "longsession_rss_mib", False),
            ("long session: CPU to resume (ms)", "resume_cpu_ms", False),
            ("long session: CPU of the turn (ms)", "turn_cpu_ms", False),
            ("1,000 turns in one process: CPU per turn, fixed part (ms)", "turn_fixed_ms", False),
            ("1,000 turns: CPU per turn per MB of request (ms)", "turn_per_mb_ms", False),
            ("1,000 turns: largest group off that line (ms)", "turn_spread_ms", False),
            ("agents per GiB (PSS)", "agents_per_gib", True),
            ("HTML export, 10k entries (ms)", "export_ms", False),
            ("HTML export page (MiB)", "export_page_mib", False),
            ("grep/find, 100k files: 8 cases, sum of medians (ms)", "tools_total_ms", False),
            ("grep/find, 100k files: slowest case (ms)", "tools_max_ms", False)]
    labels = list(res["agents"])
    head = "| | " + " | ".join(labels) + " | " + " | ".join(f"{l} / pith" for l in labels[1:]) + " |"
    print(f"\n{res['date']}, {res['cpu_model']}, {res['cpus']} CPUs ({res['machine']}); load average "
          f"{res['load_start']:.1f} at the start, {res['load_end']:.1f} at the end\n")
    print(head)
    print("|" + " --- |" * (1 + 2 * len(labels) - 1))
    p = res["agents"]["pith"]
    for name, key, higher_better in rows:
        vals = [res["agents"][l].get(key) for l in labels]
        cells = ["" if v is None else f"{v:.3g}" for v in vals]
        ratios = []
        for l, v in zip(labels[1:], vals[1:]):
            same = {"pi 0.87.1": ("087", "0.87"), "pi 1.6.0": ("16", "1.6")}
            if key in ("stream20k_s", "stream20k_cpu_s") and l in same:
                # Same protocol on both sides: pi 0.87.1 / 1.6.0 against pith --compat 0.87 / 1.6.
                suffix, version = same[l]
                ours = p.get(key.replace("stream20k", f"stream20k_{suffix}"))
                ratios.append(f"{v / ours:.1f}x (vs {version})" if v and ours else "")
                continue
            if v is None or not p.get(key):
                ratios.append("")
            elif higher_better:
                ratios.append(f"{p[key] / v:.1f}x" if v else "")
            else:
                ratios.append(f"{v / p[key]:.1f}x")
        print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    if res.get("cold_floor_ms"):
        print(f"\ncold start floor: {res['cold_floor_ms']:.3g} ms, the same harness starting a program that only"
              " answers get_state (bench-floor), in the same run")
    print(f"\nfigures: {OUT}")


main()
