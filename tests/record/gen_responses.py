import json, sys
from gen import *
from resp_sse import *

def extract(b):
    sp = b.get("instructions", "")
    for it in b.get("input", []):
        if it.get("role") in ("system", "developer") and isinstance(it.get("content"), str):
            sp = it["content"]; break
    tools = [{"name": t["name"], "description": t["description"], "parameters": t["parameters"]} for t in b.get("tools", [])]
    return sp, tools

NORETRY = {"retry": {"enabled": False}}
J = "application/json"
out = sys.argv[1]; only = sys.argv[2] if len(sys.argv) > 2 else None
os.makedirs(out, exist_ok=True)
def save(name, d):
    json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
    print(name, d["requests"], [(t["message"]["stopReason"], t["message"].get("errorMessage")) for t in d["turns"]])
def want(n): return only is None or n.startswith(only)

AZ_FILES = {}
AZ_ENV = {"AZURE_OPENAI_API_KEY": "azure-key-test", "AZURE_OPENAI_BASE_URL": "http://127.0.0.1:{PORT}/openai/v1"}
OA_FILES = {"agent/models.json": json.dumps({"providers": {"openai": {"baseUrl": "http://127.0.0.1:{PORT}/v1"}}})}
OA_ENV = {"OPENAI_API_KEY": "sk-openai-test"}

if want("azure_tool"):
    save("azure_tool", record(extract, "azure-openai-responses", "gpt-5.2", AZ_ENV, [Reply(tool_turn()), Reply(text_turn())], ["Run echo hi please"], AZ_FILES))
if want("azure_nonreasoning"):
    save("azure_nonreasoning", record(extract, "azure-openai-responses", "gpt-4.1", dict(AZ_ENV, AZURE_OPENAI_DEPLOYMENT_NAME_MAP="gpt-4.1=my-gpt41, other=x", AZURE_OPENAI_API_VERSION="2025-04-01-preview"), [Reply(text_turn())], ["hello"], AZ_FILES))
if want("azure_off"):
    save("azure_off", record(extract, "azure-openai-responses", "gpt-5.2", AZ_ENV, [Reply(text_turn())], ["hello"], AZ_FILES, thinking="off"))
if want("azure_incomplete"):
    save("azure_incomplete", record(extract, "azure-openai-responses", "gpt-4.1", AZ_ENV, [Reply(incomplete_turn())], ["hello"], AZ_FILES, NORETRY))
if want("azure_failed"):
    save("azure_failed", record(extract, "azure-openai-responses", "gpt-4.1", AZ_ENV, [Reply(failed_turn())], ["hello"], AZ_FILES, NORETRY))
for code, body in [("400", '{"error":{"message":"Invalid input","type":"invalid_request_error","param":null,"code":null}}'), ("429", '{"error":{"code":"429","message":"Rate limit is exceeded. Try again in 2 seconds."}}'), ("503", '{"error":{"code":"503","message":"Service unavailable"}}')]:
    if want("azure_error_" + code):
        save("azure_error_" + code, record(extract, "azure-openai-responses", "gpt-4.1", AZ_ENV, [Reply(body, int(code), {"x-should-retry": "false"}, ctype=J)] * 3, ["hello"], AZ_FILES, NORETRY))
if want("openai_tool"):
    save("openai_tool", record(extract, "openai", "gpt-5.2", OA_ENV, [Reply(tool_turn()), Reply(text_turn())], ["Run echo hi please"], OA_FILES))
if want("openai_off"):
    save("openai_off", record(extract, "openai", "gpt-5.2", OA_ENV, [Reply(text_turn())], ["hello"], OA_FILES, thinking="off"))
