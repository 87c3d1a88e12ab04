import json, sys
from cap import *

def ev(kind, obj): return es_event(kind, obj)

def stream_tool():
    s = ev("messageStart", {"role": "assistant", "p": "abc"})
    s += ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "I should run"}}, "p": "ab"})
    s += ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": " a command."}}})
    s += ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "EqQBCkYIBRgCKkB"}}})
    s += ev("contentBlockStop", {"contentBlockIndex": 0})
    s += ev("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Running it."}})
    s += ev("contentBlockStop", {"contentBlockIndex": 1})
    s += ev("contentBlockStart", {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "bash"}}})
    s += ev("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{\"command\": \"ec"}}})
    s += ev("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": "ho hi\"}"}}})
    s += ev("contentBlockStop", {"contentBlockIndex": 2})
    s += ev("messageStop", {"stopReason": "tool_use"})
    s += ev("metadata", {"usage": {"inputTokens": 812, "outputTokens": 31, "totalTokens": 1243, "cacheReadInputTokens": 300, "cacheWriteInputTokens": 100}, "metrics": {"latencyMs": 1234}})
    return s

def stream_text():
    s = ev("messageStart", {"role": "assistant"})
    s += ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "The output "}})
    s += ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "was hi. 😀 中文"}})
    s += ev("contentBlockStop", {"contentBlockIndex": 0})
    s += ev("messageStop", {"stopReason": "end_turn"})
    s += ev("metadata", {"usage": {"inputTokens": 900, "outputTokens": 12, "totalTokens": 912}, "metrics": {"latencyMs": 100}})
    return s

ENV = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
       "AWS_SESSION_TOKEN": "session-token-example", "AWS_REGION": "us-west-2", "AWS_BEDROCK_FORCE_HTTP1": "1"}

def run(model, replies, prompts, extra_env=None, settings=None):
    files = {"agent/models.json": json.dumps({"providers": {"amazon-bedrock": {"baseUrl": "http://127.0.0.1:{PORT}"}}})}
    if settings: files["agent/settings.json"] = json.dumps(settings)
    env = dict(ENV); env.update(extra_env or {})
    return run_pi(["--provider", "amazon-bedrock", "--model", model], env, replies, prompts, files=files)

ES = "application/vnd.amazon.eventstream"
if __name__ == "__main__" and sys.argv[1:2] != ["errors"]:
    out = {}
    which = sys.argv[1] if len(sys.argv) > 1 else "tool"
    if which == "tool":
        for model in sys.argv[2:] or ["us.anthropic.claude-sonnet-4-5-20250929-v1:0"]:
            ev_, reqs, err = run(model, [Reply(stream_tool(), ctype=ES), Reply(stream_text(), ctype=ES)], ["Run echo hi please"])
            out[model] = {"requests": reqs, "messages": assistant_messages(ev_), "stderr": err}
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)

def errors():
    out = {}
    model = "amazon.nova-pro-v1:0"
    J = "application/json"
    cases = [
        ("400", [Reply('{"message":"The provided model identifier is invalid."}', 400, {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/", "x-amzn-requestid": "r-1"}, ctype=J)]),
        ("429", [Reply('{"message":"Too many requests, please wait before trying again."}', 429, {"x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"}, ctype=J)] * 3),
        ("503", [Reply('{"message":"Bedrock is unable to process your request."}', 503, {"x-amzn-errortype": "ServiceUnavailableException:http://internal.amazon.com/coral/com.amazon.bedrock/"}, ctype=J)] * 3),
        ("403", [Reply('{"Message":"User: arn:aws:iam::123:user/x is not authorized"}', 403, {"x-amzn-errortype": "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.bedrock/"}, ctype=J)]),
        ("500plain", [Reply('oops', 500, ctype="text/plain")] * 3),
        ("stream_exc", [Reply(ev("messageStart", {"role": "assistant"}) + ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Part"}}) + es_exception("throttlingException", "Too many tokens, please wait before trying again."), ctype=ES)]),
        ("stream_modelerr", [Reply(ev("messageStart", {"role": "assistant"}) + es_exception("modelStreamErrorException", "Model produced invalid sequence"), ctype=ES)]),
        ("max_tokens", [Reply(ev("messageStart", {"role": "assistant"}) + ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Trunc"}}) + ev("contentBlockStop", {"contentBlockIndex": 0}) + ev("messageStop", {"stopReason": "max_tokens"}) + ev("metadata", {"usage": {"inputTokens": 5, "outputTokens": 7, "totalTokens": 12}}), ctype=ES)]),
        ("guardrail", [Reply(ev("messageStart", {"role": "assistant"}) + ev("messageStop", {"stopReason": "guardrail_intervened"}) + ev("metadata", {"usage": {"inputTokens": 5, "outputTokens": 0, "totalTokens": 5}}), ctype=ES)]),
        ("no_stop", [Reply(ev("messageStart", {"role": "assistant"}) + ev("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}}), ctype=ES)]),
    ]
    for name, reps in cases:
        e, reqs, err = run(model, reps, ["hello"], settings={"retry": {"enabled": False}})
        out[name] = {"n_requests": len(reqs), "messages": assistant_messages(e), "stderr": err[:1000]}
    return out

if __name__ == "__main__" and sys.argv[1:2] == ["errors"]:
    pass
if __name__ == "__main__" and sys.argv[1:2] == ["errors"]:
    json.dump(errors(), sys.stdout, indent=1, ensure_ascii=False)
