import json, sys
from cap import *

def chunk(model, delta, finish=None, usage=None, id_="cmpl-e5cc70bb28c444948073e77776eb30ef"):
    c = {"id": id_, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage: c["usage"] = usage
    return "data: " + json.dumps(c, separators=(",", ":"), ensure_ascii=False) + "\n\n"

def sse_tool(model):
    s = chunk(model, {"role": "assistant", "content": ""})
    s += chunk(model, {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "I should run"}]}]})
    s += chunk(model, {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": " a command."}]}]})
    s += chunk(model, {"content": [{"type": "text", "text": "Running it."}]})
    s += chunk(model, {"tool_calls": [{"id": "D681PevKs", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ec"}, "index": 0}]})
    s += chunk(model, {"tool_calls": [{"id": "D681PevKs", "type": "function", "function": {"name": "bash", "arguments": "ho hi\"}"}, "index": 0}]}, "tool_calls",
               {"prompt_tokens": 812, "completion_tokens": 31, "total_tokens": 843})
    s += "data: [DONE]\n\n"
    return s

def sse_text(model):
    s = chunk(model, {"role": "assistant", "content": ""})
    s += chunk(model, {"content": "The output "})
    s += chunk(model, {"content": "was hi. 😀 中文"})
    s += chunk(model, {"content": ""}, "stop", {"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912})
    s += "data: [DONE]\n\n"
    return s

def run(model, replies, prompts, extra_env=None, settings=None):
    files = {"agent/models.json": json.dumps({"providers": {"mistral": {"baseUrl": "http://127.0.0.1:{PORT}"}}})}
    if settings: files["agent/settings.json"] = json.dumps(settings)
    env = {"MISTRAL_API_KEY": "sk-mistral-test"}
    env.update(extra_env or {})
    return run_pi(["--provider", "mistral", "--model", model], env, replies, prompts, files=files)

if __name__ == "__main__":
    out = {}
    which = sys.argv[1] if len(sys.argv) > 1 else "tool"
    if which == "tool":
        for model in ["magistral-medium-latest", "mistral-small-latest", "devstral-medium-latest"]:
            ev, reqs, err = run(model, [Reply(sse_tool(model)), Reply(sse_text(model))], ["Run echo hi please"])
            out[model] = {"requests": reqs, "messages": assistant_messages(ev), "stderr": err}
    elif which == "errors":
        model = "devstral-medium-latest"
        for name, rep in [("400", Reply('{"object":"error","message":"Invalid model: x","type":"invalid_model","param":null,"code":"1500"}', 400, ctype="application/json")),
                          ("429", Reply('{"object":"error","message":"Requests rate limit exceeded","type":"rate_limited","param":null,"code":"1300"}', 429, ctype="application/json")),
                          ("503", Reply('upstream connect error', 503, ctype="text/plain"))]:
            ev, reqs, err = run(model, [rep, rep, rep, rep, rep], ["hello"], settings={"retry": {"enabled": False}})
            out[name] = {"n_requests": len(reqs), "messages": assistant_messages(ev), "stderr": err}
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
