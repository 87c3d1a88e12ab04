import json, os, sys
from gen import *
from resp_sse import text_turn
A_TEXT = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../fixtures/anthropic/text.sse")).read()
O_TEXT = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../fixtures/openai/text.sse")).read()
def extract(b):
    sp = ""
    if isinstance(b.get("system"), list): sp = b["system"][-1]["text"]
    for it in b.get("messages", []) + b.get("input", []):
        if it.get("role") in ("system", "developer") and isinstance(it.get("content"), str): sp = it["content"]; break
    tools = []
    for t in b.get("tools", []):
        if "function" in t: t = t["function"]
        tools.append({"name": t["name"], "description": t["description"], "parameters": t.get("parameters", t.get("input_schema"))})
    return sp, tools
out = sys.argv[1]; os.makedirs(out, exist_ok=True)
def save(name, d):
    json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
    print(name, d["requests"], [(t["message"]["stopReason"], t["message"].get("errorMessage")) for t in d["turns"]])
FILES = {"agent/models.json": json.dumps({"providers": {"github-copilot": {"baseUrl": "http://127.0.0.1:{PORT}"}}})}
ENV = {"COPILOT_GITHUB_TOKEN": "ghu_copilot_token"}
# Models to record with (pi 0.87.1 ships other Copilot models: COPILOT_MODELS=claude-haiku-4.5,gemini-3.5-flash,gpt-5-mini).
A_MODEL, C_MODEL, R_MODEL = os.environ.get("COPILOT_MODELS", "claude-sonnet-4.5,gpt-4.1,gpt-5.2").split(",")
save("copilot_anthropic", record(extract, "github-copilot", A_MODEL, ENV, [Reply(A_TEXT)], ["hello"], FILES))
save("copilot_completions", record(extract, "github-copilot", C_MODEL, ENV, [Reply(O_TEXT)], ["hello"], FILES))
save("copilot_responses", record(extract, "github-copilot", R_MODEL, ENV, [Reply(text_turn())], ["hello"], FILES))
