import json, sys
from gen import *
from vertex_sse import *
from gen_vertex import extract
out = sys.argv[1]; os.makedirs(out, exist_ok=True)
def save(name, d):
    json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
    print(name, d["requests"], [(t["message"]["stopReason"], t["message"].get("errorMessage")) for t in d["turns"]])
FILES = {"agent/models.json": json.dumps({"providers": {"google": {"baseUrl": "http://127.0.0.1:{PORT}/v1beta"}}})}
ENV = {"GEMINI_API_KEY": "gemini-key"}
save("google_tool", record(extract, "google", "gemini-2.5-pro", ENV, [Reply(tool_turn()), Reply(text_turn())], ["Run echo hi please"], FILES))
