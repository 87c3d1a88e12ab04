#!/usr/bin/env python3
"""The oracle's long-session benchmark (`<oracle>/bench/longsession.py`: resume a pi v3 session of
TURNS turns, ~4 entries a turn, and take one more turn), measured the same way for every agent,
with one more figure: the request on the wire.

  tests/bench/longsession.py [--oracle DIR] [--turns 5000] [--runs 3] -- AGENT_CMD... [-- AGENT_CMD...]

The session file is the oracle's (its `write_session`, loaded from the oracle's script so the two
stay the same). The fake LLM is the oracle's `fakellm.py` run by `fakellm_wire.py`, which adds a
`request_body_read` mark when the request body has come off the socket. Figures (medians):

- resume: spawn -> first `get_state` response;
- wire: prompt sent -> request body read by the server (the request on the wire);
- request: prompt sent -> the oracle's `request_received` mark, taken after the server has also
  parsed the body and written it to its log (what the oracle's script reports; for a 12 MB body
  that is tens of milliseconds of Python);
- turn: prompt sent -> `agent_end`;
- peak RSS: VmHWM sampled from /proc;
- resume CPU: user + system time (wait4) of a process that resumes, answers `get_state` and
  exits at the end of its input; turn CPU: that of a process that also takes the turn, less the
  former. Both count every thread and do not depend on how loaded the machine is the way wall
  times do.

Several agents: their runs are interleaved; one line each, in order. Prints `longsession: resume_ms=... wire_ms=... request_ms=... turn_ms=... peak_rss_mib=...
resume_cpu_ms=... turn_cpu_ms=...`.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def oracle_session_writer(oracle):
    """`write_session` from the oracle's longsession.py (a script: run it without its `main()`)."""
    path = os.path.join(oracle, "bench", "longsession.py")
    src = open(path).read()
    if not src.rstrip().endswith("main()"):
        sys.exit(f"{path}: unexpected layout (no trailing main() call)")
    ns = {"__file__": path, "__name__": "oracle_longsession"}
    exec(compile(src.rstrip()[: -len("main()")], path, "exec"), ns)
    return ns["write_session"]


def hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reap(p, timeout):
    """Wait for `p` (killed after `timeout` s) and return its CPU seconds (user + system) from
    wait4: microsecond resolution, and the work of every thread, also those already gone."""
    until = time.time() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return ru.ru_utime + ru.ru_stime
        if time.time() > until:
            p.kill()
            until = time.time() + 60
        time.sleep(0.005)


def one_run(cmd, work, source, models, marks, i, turn=True):
    d = os.path.join(work, f"run{i}")
    for sub in ("home", "userhome", "cwd", "tmp", "sessions"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    with open(os.path.join(d, "home", "models.json"), "w") as f:
        f.write(models)
    sess = os.path.join(d, "sessions", "big.jsonl")
    with open(source) as f, open(sess, "w") as g:
        head = json.loads(f.readline())
        head["cwd"] = os.path.join(d, "cwd")
        g.write(json.dumps(head, separators=(",", ":")) + "\n")
        shutil.copyfileobj(f, g)
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": os.path.join(d, "userhome"),
           "PI_CODING_AGENT_DIR": os.path.join(d, "home"), "TMPDIR": os.path.join(d, "tmp"),
           "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    open(marks, "w").close()
    t0 = time.time()
    p = subprocess.Popen(cmd + ["--provider", "fake", "--model", "fake-model", "--session", sess,
                                "--session-dir", os.path.join(d, "sessions")],
                         cwd=os.path.join(d, "cwd"), env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = [0]
    stop = [False]

    def sampler():
        while not stop[0]:
            peak[0] = max(peak[0], hwm_kib(p.pid))
            time.sleep(0.005)

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    watchdog = threading.Timer(300, p.kill)
    watchdog.start()
    p.stdin.write(b'{"id":"s","type":"get_state"}\n')
    p.stdin.flush()
    resume = sent = end = None
    for line in p.stdout:
        now = time.time()
        if resume is None and b'"get_state"' in line:
            resume = now - t0
            if not turn:
                break
            open(marks, "w").close()
            sent = time.time()
            p.stdin.write(b'{"id":"p","type":"prompt","message":"one more step"}\n')
            p.stdin.flush()
        elif b'"type":"agent_end"' in line[:30]:
            end = now - sent
            break
    peak[0] = max(peak[0], hwm_kib(p.pid))
    stop[0] = True
    watchdog.cancel()
    p.stdin.close()
    cpu = reap(p, 60)
    shutil.rmtree(d, ignore_errors=True)
    if not turn:
        return {"resume_cpu_ms": cpu * 1000}
    wire = req = None
    with open(marks) as f:
        for line in f:
            m = json.loads(line)
            if m.get("mark") == "request_body_read" and wire is None:
                wire = m["ts"] - sent
            if m.get("mark") == "request_received" and req is None:
                req = m["ts"] - sent
    nan = float("nan")
    return {"resume_ms": resume * 1000 if resume else nan, "wire_ms": wire * 1000 if wire else nan,
            "request_ms": req * 1000 if req else nan, "turn_ms": end * 1000 if end else nan,
            "peak_rss_mib": peak[0] / 1024, "cpu_ms": cpu * 1000}


def main():
    a = sys.argv[1:]
    sep = a.index("--")
    opts = a[:sep]
    # One agent command, or several separated by `--`: their runs are interleaved, so every
    # agent meets the same load.
    cmds = [[]]
    for word in a[sep + 1:]:
        if word == "--":
            cmds.append([])
        else:
            cmds[-1].append(word)
    for cmd in cmds:
        if "/" in cmd[0]:
            cmd[0] = os.path.abspath(cmd[0])  # the agent runs in its own directory

    def opt(name, default):
        return type(default)(opts[opts.index(name) + 1]) if name in opts else default

    oracle = os.path.abspath(opt("--oracle", os.path.join(ROOT, "..", "shared", "oracle")))
    turns, runs = opt("--turns", 5000), opt("--runs", 3)
    work = tempfile.mkdtemp(prefix="pith-longsession-")
    source = os.path.join(work, "big.jsonl")
    entries = oracle_session_writer(oracle)(source, os.path.join(work, "cwd"), turns, 2000)
    marks = os.path.join(work, "marks.jsonl")
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, "fakellm_wire.py"), "--oracle", oracle,
                            "--marks", marks, "--log", os.path.join(work, "requests.jsonl")],
                           stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline().split()[1])
        with open(os.path.join(oracle, "config", "models.json.tmpl")) as f:
            models = f.read().replace("{PORT}", str(port))
        res = [[] for _ in cmds]
        for i in range(runs):
            for cmd, r in zip(cmds, res):
                # The turn and the resume alone back to back, so both meet the same load.
                r.append(one_run(cmd, work, source, models, marks, i))
                r[-1].update(one_run(cmd, work, source, models, marks, i, turn=False))
    finally:
        srv.terminate()
    print(f"session: {entries} entries, {os.path.getsize(source) / 1e6:.1f} MB")
    for r in res:
        med = {k: statistics.median(x[k] for x in r) for k in r[0]}
        # The turn's CPU: a resumed process that takes one turn, less one that only resumes.
        med["turn_cpu_ms"] = med.pop("cpu_ms") - med["resume_cpu_ms"]
        print("longsession: " + " ".join(f"{k}={v:.1f}" for k, v in med.items()))
    shutil.rmtree(work, ignore_errors=True)


main()
