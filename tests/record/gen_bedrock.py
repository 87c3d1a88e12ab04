import json, sys, base64
from gen import *
from bedrock_cap import stream_tool, stream_text, ev, ES

def extract(b):
    sp = b.get("system", [{}])[0].get("text", "") if b.get("system") else ""
    tools = [{"name": t["toolSpec"]["name"], "description": t["toolSpec"]["description"], "parameters": t["toolSpec"]["inputSchema"]["json"]} for t in b.get("toolConfig", {}).get("tools", [])]
    return sp, tools

FILES = {"agent/models.json": json.dumps({"providers": {"amazon-bedrock": {"baseUrl": "http://127.0.0.1:{PORT}"}}})}
ENV = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
       "AWS_SESSION_TOKEN": "session-token-example", "AWS_REGION": "us-west-2", "AWS_BEDROCK_FORCE_HTTP1": "1"}
NORETRY = {"retry": {"enabled": False}}
J = "application/json"
out = sys.argv[1]
only = sys.argv[2] if len(sys.argv) > 2 else None
os.makedirs(out, exist_ok=True)
def save(name, d):
    json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
    print(name, d["requests"], [(t["message"]["stopReason"], t["message"].get("errorMessage")) for t in d["turns"]])
def want(name):
    return only is None or only == name

def thinking_nosig():
    s = ev("messageStart", {"role": "assistant"})
    s += ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Thinking without a signature."}}})
    s += ev("contentBlockStop", {"contentBlockIndex": 0})
    s += ev("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Done."}})
    s += ev("contentBlockStop", {"contentBlockIndex": 1})
    s += ev("messageStop", {"stopReason": "end_turn"})
    s += ev("metadata", {"usage": {"inputTokens": 50, "outputTokens": 8}, "metrics": {"latencyMs": 1}})
    return s

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
def read_png():
    s = ev("messageStart", {"role": "assistant"})
    s += ev("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_read1", "name": "read"}}})
    s += ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{\"path\":\"dot.png\"}"}}})
    s += ev("contentBlockStop", {"contentBlockIndex": 0})
    s += ev("messageStop", {"stopReason": "tool_use"})
    s += ev("metadata", {"usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}})
    return s

if want("tool_sonnet45"):
    save("tool_sonnet45", record(extract, "amazon-bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", ENV, [Reply(stream_tool(), ctype=ES), Reply(stream_text(), ctype=ES)], ["Run echo hi please"], FILES))
if want("tool_opus46"):
    save("tool_opus46", record(extract, "amazon-bedrock", "global.anthropic.claude-opus-4-6-v1", ENV, [Reply(stream_tool(), ctype=ES), Reply(stream_text(), ctype=ES)], ["Run echo hi please"], FILES, thinking="xhigh"))
if want("tool_deepseek"):
    save("tool_deepseek", record(extract, "amazon-bedrock", "deepseek.r1-v1:0", ENV, [Reply(stream_tool(), ctype=ES), Reply(stream_text(), ctype=ES)], ["Run echo hi please"], FILES))
if want("thinking_nosig"):
    save("thinking_nosig", record(extract, "amazon-bedrock", "us.anthropic.claude-haiku-4-5-20251001-v1:0", ENV, [Reply(thinking_nosig(), ctype=ES), Reply(stream_text(), ctype=ES)], ["think", "again"], FILES, thinking="low"))
if want("image_nova"):
    save("image_nova", record(extract, "amazon-bedrock", "amazon.nova-pro-v1:0", ENV, [Reply(read_png(), ctype=ES), Reply(stream_text(), ctype=ES)], ["Look at dot.png"], FILES, cwd_files={"dot.png": PNG}))
if want("image_textonly"):
    save("image_textonly", record(extract, "amazon-bedrock", "amazon.nova-micro-v1:0", ENV, [Reply(read_png(), ctype=ES), Reply(stream_text(), ctype=ES)], ["Look at dot.png"], FILES, cwd_files={"dot.png": PNG}))
m = "amazon.nova-pro-v1:0"
errs = [
    ("error_400", [Reply('{"message":"The provided model identifier is invalid."}', 400, {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"}, ctype=J)]),
    ("error_429", [Reply('{"message":"Too many requests, please wait before trying again."}', 429, {"x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"}, ctype=J)] * 3),
    ("error_503", [Reply('{"message":"Bedrock is unable to process your request."}', 503, {"x-amzn-errortype": "ServiceUnavailableException:http://internal.amazon.com/coral/com.amazon.bedrock/"}, ctype=J)] * 3),
    ("error_403", [Reply('{"Message":"User: arn:aws:iam::123:user/x is not authorized"}', 403, {"x-amzn-errortype": "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.bedrock/"}, ctype=J)]),
    ("error_500_plain", [Reply('oops', 500, ctype="text/plain")] * 3),
    ("error_500_json_notype", [Reply('{"message":"internal failure"}', 500, ctype=J)] * 3),
    ("error_400_empty", [Reply('', 400, ctype=J)]),
    ("error_400_type_in_body", [Reply('{"__type":"com.amazon.coral.validate#ValidationException","message":"bad input"}', 400, ctype=J)]),
    ("stream_throttling", [Reply(ev("messageStart", {"role": "assistant"}) + ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Part"}}) + es_exception("throttlingException", "Too many tokens, please wait before trying again."), ctype=ES)]),
    ("stream_model_error", [Reply(ev("messageStart", {"role": "assistant"}) + es_exception("modelStreamErrorException", "Model produced invalid sequence"), ctype=ES)]),
    ("stream_max_tokens", [Reply(ev("messageStart", {"role": "assistant"}) + ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Trunc"}}) + ev("contentBlockStop", {"contentBlockIndex": 0}) + ev("messageStop", {"stopReason": "max_tokens"}) + ev("metadata", {"usage": {"inputTokens": 5, "outputTokens": 7, "totalTokens": 12}}), ctype=ES)]),
    ("stream_guardrail", [Reply(ev("messageStart", {"role": "assistant"}) + ev("messageStop", {"stopReason": "guardrail_intervened"}) + ev("metadata", {"usage": {"inputTokens": 5, "outputTokens": 0, "totalTokens": 5}}), ctype=ES)]),
]
for name, reps in errs:
    if want(name):
        save(name, record(extract, "amazon-bedrock", m, ENV, reps, ["hello"], FILES, NORETRY))
