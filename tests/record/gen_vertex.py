import json, sys
from gen import *
from vertex_sse import *

def extract(b):
    si = b.get("systemInstruction")
    sp = si if isinstance(si, str) else (si or {}).get("parts", [{}])[0].get("text", "") if si else ""
    tools = []
    for t in b.get("tools", []):
        for f in t.get("functionDeclarations", []):
            tools.append({"name": f["name"], "description": f["description"], "parameters": f.get("parametersJsonSchema", f.get("parameters"))})
    return sp, tools

if __name__ == "__main__":
    NORETRY = {"retry": {"enabled": False}}
    J = "application/json"
    out = sys.argv[1]; only = sys.argv[2] if len(sys.argv) > 2 else None
    os.makedirs(out, exist_ok=True)
    def save(name, d):
        json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
        print(name, d["requests"], [(t["message"]["stopReason"], t["message"].get("errorMessage")) for t in d["turns"]])
    def want(n): return only is None or n.startswith(only)
    KEY = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../fixtures/google/test-service-account.pem")).read()
    SA = {"type": "service_account", "project_id": "proj-1", "private_key_id": "kid-1", "private_key": KEY,
          "client_email": "pith@proj-1.iam.gserviceaccount.com", "client_id": "123", "token_uri": "http://127.0.0.1:{PORT}/token"}
    FILES_BASE = {"agent/models.json": json.dumps({"providers": {"google-vertex": {"baseUrl": "http://127.0.0.1:{PORT}"}}})}
    ENV_KEY = {"GOOGLE_CLOUD_API_KEY": "vertex-api-key"}
    ENV_ADC = {"GOOGLE_APPLICATION_CREDENTIALS": "{SCRATCH}/home/sa.json", "GOOGLE_CLOUD_PROJECT": "proj-1", "GOOGLE_CLOUD_LOCATION": "us-central1"}
    FILES_ADC = dict(FILES_BASE, **{"home/sa.json": json.dumps(SA)})
    TOKEN = Reply('{"access_token":"ya29.test-token","expires_in":3599,"token_type":"Bearer"}', 200, ctype=J)
    if want("key_tool"):
        save("key_tool", record(extract, "google-vertex", "gemini-2.5-pro", ENV_KEY, [Reply(tool_turn()), Reply(text_turn())], ["Run echo hi please"], FILES_BASE))
    if want("adc_tool"):
        save("adc_tool", record(extract, "google-vertex", "gemini-2.5-pro", ENV_ADC, [TOKEN, Reply(tool_turn()), Reply(text_turn())], ["Run echo hi please"], FILES_ADC))
    if want("key_flash3"):
        save("key_flash3", record(extract, "google-vertex", "gemini-3-flash-preview", ENV_KEY, [Reply(text_turn())], ["hello"], FILES_BASE))
    if want("key_tool3"):
        # Gemini 3 and later: tool call ids in function calls and responses (pi 0.87.1).
        save("key_tool3", record(extract, "google-vertex", "gemini-3-flash-preview", ENV_KEY, [Reply(tool_turn()), Reply(text_turn())], ["Run echo hi please"], FILES_BASE))
    if want("key_off"):
        save("key_off", record(extract, "google-vertex", "gemini-2.5-flash", ENV_KEY, [Reply(text_turn())], ["hello"], FILES_BASE, thinking="off"))
    if want("key_max"):
        save("key_max", record(extract, "google-vertex", "gemini-2.5-flash", ENV_KEY, [Reply(max_turn())], ["hello"], FILES_BASE, NORETRY))
    if want("key_safety"):
        save("key_safety", record(extract, "google-vertex", "gemini-2.5-flash", ENV_KEY, [Reply(safety_turn())], ["hello"], FILES_BASE, NORETRY))
    for code, body in [("400", '{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}'), ("429", '{"error":{"code":429,"message":"Resource exhausted. Please try again later.","status":"RESOURCE_EXHAUSTED"}}'), ("503", '{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}')]:
        if want("key_error_" + code):
            save("key_error_" + code, record(extract, "google-vertex", "gemini-2.5-flash", ENV_KEY, [Reply(body, int(code), ctype=J)] * 3, ["hello"], FILES_BASE, NORETRY))
    