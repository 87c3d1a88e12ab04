"""Anthropic built-in models: a tool turn and a text answer per model and thinking level.
PI=/path/to/pi python3 gen_anthropic.py OUTDIR   (pi 0.87.1: fixtures/087/anthropic)"""
import json, os, sys
from gen import *
HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = open(os.path.join(HERE, "../../fixtures/anthropic/tool.sse")).read()
TEXT = open(os.path.join(HERE, "../../fixtures/anthropic/text.sse")).read()
THINK = open(os.path.join(HERE, "../../fixtures/anthropic/thinking.sse")).read()

def extract(b):
    sp = b["system"][-1]["text"] if isinstance(b.get("system"), list) and b["system"] else ""
    tools = [{"name": t["name"], "description": t["description"], "parameters": t["input_schema"]} for t in b.get("tools", [])]
    return sp, tools

FILES = {"agent/models.json": json.dumps({"providers": {"anthropic": {"baseUrl": "http://127.0.0.1:{PORT}"}}})}
ENV = {"ANTHROPIC_API_KEY": "sk-ant-test"}
out = sys.argv[1]; only = sys.argv[2] if len(sys.argv) > 2 else None
os.makedirs(out, exist_ok=True)
def save(name, d):
    json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
    print(name, d["requests"], [(t["message"]["stopReason"], t["message"].get("errorMessage")) for t in d["turns"]])
def want(n): return only is None or n.startswith(only)
MODELS = os.environ.get("ANTHROPIC_MODELS", "claude-sonnet-4-6,claude-opus-4-7,claude-haiku-4-5").split(",")
for m in MODELS:
    n = m.replace("-", "_").replace(".", "_")
    if want("tool_" + n):
        save("tool_" + n, record(extract, "anthropic", m, ENV, [Reply(TOOL), Reply(TEXT)], ["Run echo hi please"], FILES))
    for level in ["off", "high", "xhigh", "max"]:
        if want(f"think_{level}_{n}"):
            save(f"think_{level}_{n}", record(extract, "anthropic", m, ENV, [Reply(THINK)], ["think"], FILES, thinking=level))

# Stream endings and stop reasons pi 0.87.1 reads its own way (one model; "err_" fixtures).
def ev(name, data):
    return f"event: {name}\ndata: {data if isinstance(data, str) else json.dumps(data)}\n\n"
START = ev("message_start", {"type": "message_start", "message": {"id": "msg_e", "type": "message", "role": "assistant", "model": "claude-haiku-4-5", "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})
def text_block(i, t):
    return (ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            + ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": t}})
            + ev("content_block_stop", {"type": "content_block_stop", "index": i}))
def delta(reason, extra=None):
    d = {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 5}}
    if extra:
        d.update(extra)
    return ev("message_delta", d)
STOP = ev("message_stop", {"type": "message_stop"})
ERRS = {
    "err_refusal_explained": START + text_block(0, "No.") + delta("refusal", {"delta": {"stop_reason": "refusal", "stop_details": {"explanation": "Declined for safety"}}}) + STOP,
    "err_refusal": START + text_block(0, "No.") + delta("refusal") + STOP,
    "err_sensitive": START + text_block(0, "Hm") + delta("sensitive") + STOP,
    "err_unknown_stop": START + text_block(0, "Hm") + delta("weird_reason") + STOP,
    "err_error_event": START + text_block(0, "partial") + ev("error", {"type": "error", "error": {"type": "invalid_request_error", "message": "boom"}}),
    "err_no_message_stop": START + text_block(0, "cut") + delta("end_turn"),
    "err_no_stop_reason": START + text_block(0, "no reason") + STOP,
    "err_transformations": START + text_block(0, "ok") + delta("end_turn", {"input_transformations": [{"type": "image_resized", "path": "messages.0.content.1", "reason": "too large"}, {"type": "truncated", "path": None}]}) + STOP,
    "err_fallback_first": START + ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "fallback"}}) + ev("content_block_stop", {"type": "content_block_stop", "index": 0}) + text_block(1, "from fallback") + delta("end_turn") + STOP,
    "err_fallback_mid": START + text_block(0, "first") + ev("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "fallback"}}) + text_block(2, "second") + delta("end_turn") + STOP,
    "err_control_chars": START + ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}) + 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tab\there \\q"}}\n\n' + ev("content_block_stop", {"type": "content_block_stop", "index": 0}) + delta("end_turn") + STOP,
    "err_bad_json": START + text_block(0, "x") + 'event: message_delta\ndata: {not json\n\n' + STOP,
    "err_unnamed_events": START + 'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' + text_block(1, "named") + ev("ping", {"type": "ping"}) + delta("end_turn") + STOP,
}
for name, sse in ERRS.items():
    if want(name):
        save(name, record(extract, "anthropic", "claude-haiku-4-5", ENV, [Reply(sse)], ["hi"], FILES))
