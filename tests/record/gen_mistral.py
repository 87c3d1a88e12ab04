import json, sys
from gen import *
from mistral_cap import sse_tool, sse_text

def extract(b):
    sp = b["messages"][0]["content"] if b["messages"] and b["messages"][0]["role"] == "system" else ""
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"], "parameters": t["function"]["parameters"]} for t in b.get("tools", [])]
    return sp, tools

FILES = {"agent/models.json": json.dumps({"providers": {"mistral": {"baseUrl": "http://127.0.0.1:{PORT}"}}})}
ENV = {"MISTRAL_API_KEY": "sk-mistral-test"}
NORETRY = {"retry": {"enabled": False}}
J = "application/json"
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def save(name, d):
    json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
    print(name, d["requests"], [t["message"]["stopReason"] for t in d["turns"]])

for model, name in [("magistral-medium-latest", "tool_magistral"), ("mistral-small-latest", "tool_small"), ("devstral-medium-latest", "tool_devstral")]:
    save(name, record(extract, "mistral", model, ENV, [Reply(sse_tool(model)), Reply(sse_text(model))], ["Run echo hi please"], FILES))
m = "devstral-medium-latest"
save("error_400", record(extract, "mistral", m, ENV, [Reply('{"object":"error","message":"Invalid model: x","type":"invalid_model","param":null,"code":"1500"}', 400, ctype=J)], ["hello"], FILES, NORETRY))
save("error_429", record(extract, "mistral", m, ENV, [Reply('{"object":"error","message":"Requests rate limit exceeded","type":"rate_limited","param":null,"code":"1300"}', 429, ctype=J)], ["hello"], FILES, NORETRY))
save("error_503", record(extract, "mistral", m, ENV, [Reply('upstream connect error or disconnect/reset before headers', 503, ctype="text/plain")], ["hello"], FILES, NORETRY))
# image input on a text-only model and on a vision model, via a tool result image (read a png)
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
def sse_read(model):
    from mistral_cap import chunk
    s = chunk(model, {"role": "assistant", "content": ""})
    s += chunk(model, {"tool_calls": [{"id": "abcDEF123", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"dot.png\"}"}, "index": 0}]}, "tool_calls", {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
    return s + "data: [DONE]\n\n"
for model, name in [("devstral-medium-latest", "image_textonly"), ("mistral-large-latest", "image_vision")]:
    import base64 as b64
    d = record(extract, "mistral", model, ENV, [Reply(sse_read(model)), Reply(sse_text(model))], ["Look at dot.png"], FILES, cwd_files={"dot.png": PNG})
    save(name, d)
