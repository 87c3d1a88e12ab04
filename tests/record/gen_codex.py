import json, sys, base64, time
from gen import *
from resp_sse import *
from gen_responses_common import extract

def b64u(d): return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")
JWT = "eyJhbGciOiJub25lIn0." + b64u({"https://api.openai.com/auth": {"chatgpt_account_id": "acc-42"}, "exp": 4102444800}) + ".sig"
AUTH = {"openai-codex": {"type": "oauth", "access": JWT, "refresh": "rt-codex", "expires": 4102444800000, "accountId": "acc-42"}}
FILES = {"agent/models.json": json.dumps({"providers": {"openai-codex": {"baseUrl": "http://127.0.0.1:{PORT}/backend-api"}}}),
         "agent/auth.json": json.dumps(AUTH)}
SETTINGS = {"transport": "sse"}
NORETRY = {"transport": "sse", "retry": {"enabled": False}}
J = "application/json"
out = sys.argv[1]; only = sys.argv[2] if len(sys.argv) > 2 else None
os.makedirs(out, exist_ok=True)
def save(name, d):
    json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
    print(name, d["requests"], [(t["message"]["stopReason"], t["message"].get("errorMessage")) for t in d["turns"]])
def want(n): return only is None or n.startswith(only)
# The models to record with (pi 0.87.1 no longer ships gpt-5.1/5.2 for Codex: CODEX_MODEL=gpt-5.5).
MODEL = os.environ.get("CODEX_MODEL", "gpt-5.2")
MODEL_OFF = os.environ.get("CODEX_MODEL_OFF", os.environ.get("CODEX_MODEL", "gpt-5.1"))
def codex_done(s):  # codex sends response.done rather than completed
    return s.replace('"type":"response.completed"', '"type":"response.done"').replace("event: response.completed", "event: response.done")
if want("codex_tool"):
    save("codex_tool", record(extract, "openai-codex", MODEL, {}, [Reply(codex_done(tool_turn())), Reply(text_turn())], ["Run echo hi please"], FILES, SETTINGS))
if want("codex_off"):
    save("codex_off", record(extract, "openai-codex", MODEL_OFF, {}, [Reply(text_turn())], ["hello"], FILES, SETTINGS, thinking="off"))
if want("codex_incomplete"):
    save("codex_incomplete", record(extract, "openai-codex", MODEL, {}, [Reply(incomplete_turn())], ["hello"], FILES, NORETRY))
if want("codex_failed"):
    save("codex_failed", record(extract, "openai-codex", MODEL, {}, [Reply(failed_turn())], ["hello"], FILES, NORETRY))
if want("codex_error_event"):
    save("codex_error_event", record(extract, "openai-codex", MODEL, {}, [Reply(sse([{"type": "error", "code": "rate_limit_exceeded", "message": "Slow down."}]))], ["hello"], FILES, NORETRY))
for code, body in [("400", '{"error":{"message":"Unsupported parameter","type":"invalid_request_error"}}'), ("429", '{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus"}}'), ("503", 'upstream connect error')]:
    if want("codex_error_" + code):
        save("codex_error_" + code, record(extract, "openai-codex", MODEL, {}, [Reply(body, int(code), ctype=J if code != "503" else "text/plain")] * 4, ["hello"], FILES, NORETRY))
