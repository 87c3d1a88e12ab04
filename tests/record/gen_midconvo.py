"""pi 0.87.1 only: tools changing mid-run (an extension registers a tool, or drops one) with models
that take system messages mid-conversation. The fixtures keep the transcript's system messages.
PI=/path/to/pi-0.87.1 python3 gen_midconvo.py OUTDIR [only]   (fixtures/087/midconvo)"""
import json, os, sys
from gen import *
from resp_sse import sse
from gen_responses_common import extract as responses_extract

EXT = r"""
export default function (pi) {
  const late = {
    name: "late_tool", label: "Late", description: "A tool registered mid-run",
    promptSnippet: "Say late things",
    parameters: { type: "object", properties: { message: { type: "string", description: "What to say" } }, required: ["message"] },
    async execute(_id, params) { return { content: [{ type: "text", text: "late " + params.message }], details: undefined }; },
  };
  pi.registerTool({
    name: "loader", label: "Loader", description: "Loads more tools",
    parameters: { type: "object", properties: { which: { type: "string" } }, required: ["which"] },
    async execute(_id, params) {
      if (params.which === "late") pi.registerTool(late);
      else if (params.which === "drop") pi.setActiveTools(pi.getActiveTools().filter((n) => n !== "read"));
      return { content: [{ type: "text", text: "loaded " + params.which }], details: undefined };
    },
  });
}
"""

def anthropic_tool(n, name, args):
    ev = lambda k, d: f"event: {k}\ndata: {json.dumps(d)}\n\n"
    return (ev("message_start", {"type": "message_start", "message": {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None, "usage": {"input_tokens": 100, "output_tokens": 1}}})
            + ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": {}}})
            + ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)}})
            + ev("content_block_stop", {"type": "content_block_stop", "index": 0})
            + ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}})
            + ev("message_stop", {"type": "message_stop"}))

def anthropic_text(n, text):
    ev = lambda k, d: f"event: {k}\ndata: {json.dumps(d)}\n\n"
    return (ev("message_start", {"type": "message_start", "message": {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None, "usage": {"input_tokens": 100, "output_tokens": 1}}})
            + ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
            + ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
            + ev("content_block_stop", {"type": "content_block_stop", "index": 0})
            + ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}})
            + ev("message_stop", {"type": "message_stop"}))

def responses_tool(n, name, args, done="response.completed"):
    a = json.dumps(args)
    fc = {"id": f"fc_{n}", "type": "function_call", "status": "completed", "arguments": a, "call_id": f"call_{n}", "name": name}
    return sse([
        {"type": "response.created", "response": {"id": f"resp_{n}", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": dict(fc, status="in_progress", arguments="")},
        {"type": "response.function_call_arguments.delta", "item_id": f"fc_{n}", "output_index": 0, "delta": a},
        {"type": "response.output_item.done", "output_index": 0, "item": fc},
        {"type": done, "response": {"id": f"resp_{n}", "status": "completed", "usage": {"input_tokens": 100, "output_tokens": 9, "total_tokens": 109}}},
    ])

def responses_text(n, text, done="response.completed"):
    msg = {"id": f"msg_{n}", "type": "message", "status": "completed", "content": [{"type": "output_text", "annotations": [], "text": text}], "role": "assistant"}
    return sse([
        {"type": "response.created", "response": {"id": f"resp_{n}", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": dict(msg, status="in_progress", content=[])},
        {"type": "response.content_part.added", "item_id": f"msg_{n}", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "annotations": [], "text": ""}},
        {"type": "response.output_text.delta", "item_id": f"msg_{n}", "output_index": 0, "content_index": 0, "delta": text},
        {"type": "response.output_item.done", "output_index": 0, "item": msg},
        {"type": done, "response": {"id": f"resp_{n}", "status": "completed", "usage": {"input_tokens": 100, "output_tokens": 3, "total_tokens": 103}}},
    ])

def chat(chunks):
    return "".join("data: " + json.dumps(c) + "\n\n" for c in chunks) + "data: [DONE]\n\n"

def completions_tool(n, name, args):
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return chat([
        dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": None, "tool_calls": [{"index": 0, "id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": ""}}]}, "finish_reason": None}]),
        dict(base, choices=[{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(args)}}]}, "finish_reason": None}]),
        dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
        dict(base, choices=[], usage={"prompt_tokens": 100, "completion_tokens": 9, "total_tokens": 109}),
    ])

def completions_text(n, text):
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return chat([
        dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]),
        dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        dict(base, choices=[], usage={"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103}),
    ])

def anthropic_extract(b):
    sp = b["system"][-1]["text"] if isinstance(b.get("system"), list) and b["system"] else ""
    return sp, []

def completions_extract(b):
    sp = ""
    for m in b.get("messages", []):
        if m.get("role") in ("system", "developer") and isinstance(m.get("content"), str):
            sp = m["content"]; break
    return sp, []

out = sys.argv[1]; only = sys.argv[2] if len(sys.argv) > 2 else None
os.makedirs(out, exist_ok=True)
def save(name, d):
    json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
    print(name, d["requests"], [(t["message"]["stopReason"], t["message"].get("errorMessage")) for t in d["turns"]])
def want(n): return only is None or n.startswith(only)

def files(provider, base):
    return {"agent/models.json": json.dumps({"providers": {provider: {"baseUrl": base}}}), "agent/extensions/dyn.js": EXT}

def flows(tool, text):
    add = [Reply(tool(1, "loader", {"which": "late"})), Reply(tool(2, "late_tool", {"message": "hi"})), Reply(text(3, "Done."))]
    drop = [Reply(tool(1, "loader", {"which": "drop"})), Reply(text(2, "Dropped."))]
    return {"add": add, "drop": drop}

CASES = [
    ("anthropic", "claude-opus-5", "http://127.0.0.1:{PORT}", {"ANTHROPIC_API_KEY": "sk-ant-test"}, anthropic_extract, anthropic_tool, anthropic_text, {}),
    ("anthropic", "claude-opus-4-8", "http://127.0.0.1:{PORT}", {"ANTHROPIC_API_KEY": "sk-ant-test"}, anthropic_extract, anthropic_tool, anthropic_text, {}),
    ("openai", "gpt-5.5", "http://127.0.0.1:{PORT}/v1", {"OPENAI_API_KEY": "sk-openai-test"}, responses_extract, responses_tool, responses_text, {}),
    ("moonshotai", "kimi-k3", "http://127.0.0.1:{PORT}/v1", {"MOONSHOT_API_KEY": "sk-moon-test"}, completions_extract, completions_tool, completions_text, {}),
    ("deepseek", "deepseek-v4-pro", "http://127.0.0.1:{PORT}", {"DEEPSEEK_API_KEY": "sk-ds-test"}, completions_extract, completions_tool, completions_text, {}),
]
for provider, model, base, env, extract, tool, text, settings in CASES:
    for flow, replies in flows(tool, text).items():
        name = f"{flow}_{provider}_{model}".replace("-", "_").replace(".", "_")
        if want(name):
            save(name, record(extract, provider, model, env, replies, ["load tools"], files(provider, base), settings or None, keep_system=True))
