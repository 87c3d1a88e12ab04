#!/usr/bin/env python3
"""Record pi's answers to these scenarios as test fixtures.

  record.py ORACLE [LABEL] [OUT_DIR]

Takes ORACLE/transcripts/LABEL (default sk-pi: pi 0.73.1's run of this directory, made by
check.sh), drops pith's documented deviations (ORACLE/deviations.py) and normalises volatile
values exactly as ORACLE/compare.py does, and writes one OUT_DIR/<scenario>.json per scenario
(default fixtures/skills/pi-0.73.1): {"stdout": [messages], "requests": [{"path", "body"}]}.
tests/skills.rs replays each scenario against pith and compares with these files, without the
oracle.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

oracle = os.path.abspath(sys.argv[1])
label = sys.argv[2] if len(sys.argv) > 2 else "sk-pi"
here = os.path.dirname(os.path.abspath(__file__))
out_dir = sys.argv[3] if len(sys.argv) > 3 else os.path.join(here, "../../../fixtures/skills/pi-0.73.1")
sys.path.insert(0, oracle)
import compare  # noqa: E402

src = os.path.join(oracle, "transcripts", label)
tmp = tempfile.mkdtemp()
cmp_dir = os.path.join(tmp, "cmp")
extra = ["--keep-settled"] if "87" in label else []
subprocess.run([sys.executable, os.path.join(oracle, "deviations.py")] + extra + [src, cmp_dir], check=True)
os.makedirs(out_dir, exist_ok=True)
for fn in sorted(os.listdir(here)):
    if not fn.endswith(".json"):
        continue
    name = fn[:-5]
    path = os.path.join(cmp_dir, name + ".jsonl")
    if not os.path.exists(path):
        print("missing", name)
        continue
    n = compare.Normalizer()
    stdout = [n.message(json.loads(l)["msg"]) for l in open(path, encoding="utf-8")
              if json.loads(l).get("dir") == "out" and "msg" in json.loads(l)]
    n = compare.Normalizer()
    requests = []
    for l in open(os.path.join(cmp_dir, name + ".requests.jsonl"), encoding="utf-8"):
        rec = json.loads(l)
        requests.append({"path": rec.get("path"), "body": n.norm(rec.get("body"))})
    # Every request repeats the system prompt and the tools: after the first, the same value is
    # written as a reference (tests/support/scenario.rs does the same before comparing).
    for r in requests[1:]:
        for key in ("system", "tools"):
            if isinstance(r["body"], dict) and key in r["body"] and r["body"][key] == requests[0]["body"].get(key):
                r["body"][key] = "<as in the first request>"
    with open(os.path.join(out_dir, name + ".json"), "w", encoding="utf-8") as f:
        json.dump({"scenario": name, "stdout": stdout, "requests": requests}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print("recorded", name, len(stdout), "lines", len(requests), "requests")
shutil.rmtree(tmp)
