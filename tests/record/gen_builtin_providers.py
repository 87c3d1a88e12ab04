"""Record pi 0.73.1 on the built-in providers that speak an API pith already has (DeepSeek, z.ai,
Moonshot, Hugging Face, Cloudflare, OpenCode, OpenRouter, Vercel AI Gateway, Fireworks, Kimi,
MiniMax, Xiaomi, ...): fixtures/builtin/<name>.json.

  PI=/path/to/pi python3 gen_builtin_providers.py OUTDIR [name-prefix]

Each provider's base URL is pointed at the fake with models.json, keeping the real URL as the
path (`http://127.0.0.1:PORT/api.deepseek.com`): pi detects compatibility flags from substrings
of the URL (`deepseek.com`, `openrouter.ai`, ...), so the recorded requests are those the real
endpoint gets. Cloudflare's `{CLOUDFLARE_ACCOUNT_ID}` placeholders stay in and are filled by pi.
"""
import json, os, sys
from gen import *
from resp_sse import tool_turn as resp_tool_turn, text_turn as resp_text_turn
from vertex_sse import tool_turn as gem_tool_turn, text_turn as gem_text_turn

HERE = os.path.dirname(os.path.abspath(__file__))
def _dist():
    d = os.path.realpath(shutil.which(os.environ.get("PI", "pi")) or "pi")
    while d != "/" and os.path.basename(d) != "node_modules":
        d = os.path.dirname(d)
    return os.path.join(d, "@mariozechner", "pi-ai", "dist")


DIST = os.environ.get("DIST") or _dist()


def models():
    import subprocess
    js = "import(process.argv[1]).then(({MODELS})=>console.log(JSON.stringify(MODELS)))"
    out = subprocess.run(["node", "-e", js, "file://" + os.path.realpath(os.path.join(DIST, "models.generated.js"))],
                         capture_output=True, check=True).stdout
    return json.loads(out)


MODELS = models()


def extract(b):
    """System prompt and tools of a request body, whatever the API."""
    sp = ""
    if isinstance(b.get("system"), list):
        sp = b["system"][-1]["text"]
    si = b.get("systemInstruction")
    if si:
        sp = si if isinstance(si, str) else si.get("parts", [{}])[0].get("text", "")
    for it in b.get("messages", []) + b.get("input", []):
        if it.get("role") in ("system", "developer"):
            c = it.get("content")
            sp = c if isinstance(c, str) else c[0]["text"]
            break
    tools = []
    for t in b.get("tools", []):
        for f in t.get("functionDeclarations", [t.get("function", t)]):
            tools.append({"name": f["name"], "description": f["description"],
                          "parameters": f.get("parameters", f.get("input_schema", f.get("parametersJsonSchema")))})
    return sp, tools


# ---------------------------------------------------------------- openai-completions streams
def chunk(model, delta=None, finish=None, usage=None, choices=True, cid="chatcmpl-1", choice_usage=None):
    c = {"id": cid, "object": "chat.completion.chunk", "created": 1, "model": model}
    if choices:
        ch = {"index": 0, "delta": delta if delta is not None else {}, "finish_reason": finish}
        if choice_usage:
            ch["usage"] = choice_usage
        c["choices"] = [ch]
    else:
        c["choices"] = []
    if usage:
        c["usage"] = usage
    return "data: " + json.dumps(c, separators=(",", ":"), ensure_ascii=False) + "\n\n"


DONE = "data: [DONE]\n\n"
USAGE1 = {"prompt_tokens": 812, "completion_tokens": 31, "total_tokens": 843,
          "prompt_tokens_details": {"cached_tokens": 300}, "completion_tokens_details": {"reasoning_tokens": 10}}
USAGE2 = {"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912}


def cc_tool(model, rf="reasoning_content", usage=USAGE1, details=False, usage_in_choice=False):
    s = chunk(model, {"role": "assistant", "content": ""})
    if rf:
        s += chunk(model, {rf: "I should run"}) + chunk(model, {rf: " a command."})
    s += chunk(model, {"content": "Running it."})
    s += chunk(model, {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "bash", "arguments": ""}}]})
    s += chunk(model, {"tool_calls": [{"index": 0, "function": {"arguments": "{\"command\":\"ec"}}]})
    s += chunk(model, {"tool_calls": [{"index": 0, "function": {"arguments": "ho hi\"}"}}]})
    if details:
        s += chunk(model, {"reasoning_details": [{"type": "reasoning.encrypted", "id": "call_1", "data": "ZW5jcnlwdGVk", "format": "openai-responses-v1", "index": 0}]})
    if usage_in_choice:
        s += chunk(model, {}, "tool_calls", choice_usage=usage)
    else:
        s += chunk(model, {}, "tool_calls") + chunk(model, choices=False, usage=usage)
    return s + DONE


def cc_text(model, rf="reasoning_content", usage=USAGE2, text="The output was hi. 😀 中文"):
    s = chunk(model, {"role": "assistant", "content": ""}, cid="chatcmpl-2")
    if rf:
        s += chunk(model, {rf: "Done thinking."}, cid="chatcmpl-2")
    s += chunk(model, {"content": text[:11]}, cid="chatcmpl-2") + chunk(model, {"content": text[11:]}, cid="chatcmpl-2")
    s += chunk(model, {}, "stop", cid="chatcmpl-2") + chunk(model, choices=False, usage=usage, cid="chatcmpl-2")
    return s + DONE


# ---------------------------------------------------------------- anthropic-messages streams
def asse(events):
    return "".join("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e, separators=(",", ":"), ensure_ascii=False)) for e in events)


def an_tool(model, thinking=True):
    ev = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
                                                 "stop_reason": None, "usage": {"input_tokens": 812, "output_tokens": 1, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 20}}}]
    i = 0
    if thinking:
        ev += [{"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
               {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "I should run"}},
               {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": " a command."}},
               {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2lnLTE="}},
               {"type": "content_block_stop", "index": 0}]
        i = 1
    ev += [{"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
           {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": "Running it."}},
           {"type": "content_block_stop", "index": i},
           {"type": "content_block_start", "index": i + 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}},
           {"type": "content_block_delta", "index": i + 1, "delta": {"type": "input_json_delta", "partial_json": "{\"command\":\"ec"}},
           {"type": "content_block_delta", "index": i + 1, "delta": {"type": "input_json_delta", "partial_json": "ho hi\"}"}},
           {"type": "content_block_stop", "index": i + 1},
           {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 31}},
           {"type": "message_stop"}]
    return asse(ev)


def an_text(model):
    return asse([
        {"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant", "model": model, "content": [],
                                              "stop_reason": None, "usage": {"input_tokens": 900, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "The output "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "was hi. 😀 中文"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 12}},
        {"type": "message_stop"}])


# ---------------------------------------------------------------- recording
NORETRY = {"retry": {"enabled": False}}
J = "application/json"
CF = {"CLOUDFLARE_ACCOUNT_ID": "acc-1", "CLOUDFLARE_GATEWAY_ID": "gw-1"}
KEY = {  # pi's variable for each provider, with a test value
    "deepseek": "DEEPSEEK_API_KEY", "zai": "ZAI_API_KEY", "moonshotai": "MOONSHOT_API_KEY", "moonshotai-cn": "MOONSHOT_API_KEY",
    "huggingface": "HF_TOKEN", "cloudflare-workers-ai": "CLOUDFLARE_API_KEY", "cloudflare-ai-gateway": "CLOUDFLARE_API_KEY",
    "opencode": "OPENCODE_API_KEY", "opencode-go": "OPENCODE_API_KEY", "openrouter": "OPENROUTER_API_KEY",
    "vercel-ai-gateway": "AI_GATEWAY_API_KEY", "fireworks": "FIREWORKS_API_KEY", "kimi-coding": "KIMI_API_KEY",
    "minimax": "MINIMAX_API_KEY", "minimax-cn": "MINIMAX_CN_API_KEY", "xiaomi": "XIAOMI_API_KEY",
    "xiaomi-token-plan-cn": "XIAOMI_TOKEN_PLAN_CN_API_KEY", "xiaomi-token-plan-ams": "XIAOMI_TOKEN_PLAN_AMS_API_KEY",
    "xiaomi-token-plan-sgp": "XIAOMI_TOKEN_PLAN_SGP_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
}


def mirror(provider, model):
    url = MODELS[provider][model]["baseUrl"]
    return "http://127.0.0.1:{PORT}/" + url.split("://", 1)[1]


def rec(name, provider, model, replies, prompts, thinking=None, env=None, settings=None):
    base = mirror(provider, model)
    e = {KEY[provider]: "key-" + provider}
    e.update(env or {})
    files = {"agent/models.json": json.dumps({"providers": {provider: {"baseUrl": base}}})}
    # A short system prompt and only the bash tool: smaller fixtures, the same code paths.
    d = record(extract, provider, model, e, replies, prompts, files, settings, thinking, args=["--tools", "bash", "--system-prompt", "You are a test agent."])
    d["baseUrl"] = base
    for t in d["turns"]:
        t.pop("message", None)  # the same as messageJson
    return d


if __name__ == "__main__":
    out = sys.argv[1]
    only = sys.argv[2] if len(sys.argv) > 2 else None
    os.makedirs(out, exist_ok=True)

    def save(name, d):
        json.dump(d, open(os.path.join(out, name + ".json"), "w"), ensure_ascii=False, separators=(",", ":"))
        msgs = [json.loads(t["messageJson"]) for t in d["turns"]]
        print(name, d["requests"], [(m["stopReason"], m.get("errorMessage")) for m in msgs])

    def want(n):
        return only is None or n.startswith(only)

    TOOL = ["Run echo hi please"]
    TWO = ["hello", "again"]

    def tool_cc(name, p, m, rf="reasoning_content", thinking=None, env=None, **kw):
        if want(name):
            save(name, rec(name, p, m, [Reply(cc_tool(m, rf, **kw)), Reply(cc_text(m, rf))], TOOL, thinking, env))

    def two_cc(name, p, m, rf=None, thinking=None, env=None):
        if want(name):
            save(name, rec(name, p, m, [Reply(cc_text(m, rf)), Reply(cc_text(m, rf))], TWO, thinking, env))

    def tool_an(name, p, m, thinking=None, env=None, think=True):
        if want(name):
            save(name, rec(name, p, m, [Reply(an_tool(m, think)), Reply(an_text(m))], TOOL, thinking, env))

    # openai-completions: DeepSeek's format (thinking object, reasoning_effort from the map,
    # reasoning_content replayed and required on every assistant message), system role by URL.
    tool_cc("deepseek_tool", "deepseek", "deepseek-v4-flash", thinking="high",
            usage={"prompt_tokens": 812, "completion_tokens": 31, "prompt_cache_hit_tokens": 300, "prompt_cache_miss_tokens": 512})
    two_cc("deepseek_off", "deepseek", "deepseek-v4-pro", thinking="off")
    tool_cc("deepseek_xhigh", "deepseek", "deepseek-v4-pro", thinking="xhigh")
    # z.ai: enable_thinking, tool_stream, no developer role.
    tool_cc("zai_tool", "zai", "glm-4.7", thinking="medium")
    two_cc("zai_off", "zai", "glm-5.1", rf=None, thinking="off")
    # Moonshot: max_tokens, no strict, usage on the choice.
    tool_cc("moonshot_tool", "moonshotai", "kimi-k2-thinking", thinking="low", usage_in_choice=True)
    two_cc("moonshotcn_text", "moonshotai-cn", "kimi-k2.6", rf="reasoning_content")
    # Hugging Face: system role, reasoning_effort; reasoning in `reasoning`.
    tool_cc("hf_tool", "huggingface", "deepseek-ai/DeepSeek-V3.2", rf="reasoning", thinking="medium")
    two_cc("hf_plain", "huggingface", "moonshotai/Kimi-K2-Instruct")
    # Cloudflare: placeholder URLs, session affinity headers, the gateway's own key header.
    tool_cc("cf_workers_tool", "cloudflare-workers-ai", "@cf/openai/gpt-oss-120b", rf="reasoning", thinking="high", env=CF)
    tool_cc("cf_gateway_compat", "cloudflare-ai-gateway", "workers-ai/@cf/zai-org/glm-4.7-flash", thinking="medium", env=CF)
    if want("cf_gateway_responses"):
        save("cf_gateway_responses", rec("x", "cloudflare-ai-gateway", "gpt-5.4", [Reply(resp_tool_turn()), Reply(resp_text_turn())], TOOL, "medium", CF))
    tool_an("cf_gateway_anthropic", "cloudflare-ai-gateway", "claude-sonnet-4-5", "medium", CF)
    # OpenCode: every API it has.
    tool_cc("opencode_cc", "opencode", "glm-5.1", thinking="medium")
    tool_an("opencode_anthropic", "opencode", "claude-opus-4-7", thinking="xhigh")
    if want("opencode_responses"):
        save("opencode_responses", rec("x", "opencode", "gpt-5.4", [Reply(resp_tool_turn()), Reply(resp_text_turn())], TOOL, "high"))
    if want("opencode_google"):
        save("opencode_google", rec("x", "opencode", "gemini-3.1-pro", [Reply(gem_tool_turn()), Reply(gem_text_turn())], TOOL, "high"))
    tool_cc("opencodego_deepseek", "opencode-go", "deepseek-v4-flash", thinking="xhigh")
    tool_cc("opencodego_qwen", "opencode-go", "qwen3.6-plus", thinking="medium")
    two_cc("opencodego_qwen_off", "opencode-go", "qwen3.5-plus", thinking="off")
    # OpenRouter: reasoning object, encrypted reasoning details, Anthropic cache markers.
    tool_cc("openrouter_tool", "openrouter", "openai/gpt-5.4", rf="reasoning", thinking="xhigh", details=True)
    two_cc("openrouter_off", "openrouter", "openai/gpt-5.4", rf=None, thinking="off")
    tool_cc("openrouter_claude", "openrouter", "anthropic/claude-sonnet-4.5", rf="reasoning", thinking="medium")
    tool_cc("openrouter_claude_long", "openrouter", "anthropic/claude-sonnet-4.5", rf="reasoning", thinking="low",
            env={"PI_CACHE_RETENTION": "long"})
    tool_cc("openrouter_deepseek", "openrouter", "deepseek/deepseek-v4-pro", thinking="high")

    # anthropic-messages providers.
    tool_an("fireworks_tool", "fireworks", "accounts/fireworks/models/kimi-k2-thinking", "medium")
    tool_an("kimi_tool", "kimi-coding", "kimi-for-coding", "high")
    tool_an("minimax_tool", "minimax", "MiniMax-M2.7", "medium")
    tool_an("minimaxcn_tool", "minimax-cn", "MiniMax-M2.7-highspeed", "low")
    tool_an("xiaomi_tool", "xiaomi", "mimo-v2.5-pro", "medium")
    for plan in ["cn", "ams", "sgp"]:
        tool_an("xiaomi_%s_tool" % plan, "xiaomi-token-plan-" + plan, "mimo-v2-flash", "off", think=False)
    tool_an("vercel_opus47", "vercel-ai-gateway", "anthropic/claude-opus-4.7", "xhigh")
    tool_an("vercel_opus46", "vercel-ai-gateway", "anthropic/claude-opus-4.6", "xhigh")
    tool_an("vercel_gpt", "vercel-ai-gateway", "openai/gpt-5.4", "medium", env={"PI_CACHE_RETENTION": "long"})
    tool_an("anthropic_opus47", "anthropic", "claude-opus-4-7", "medium")
    tool_an("anthropic_off", "anthropic", "claude-sonnet-4-5", "off", think=False)

    # Anthropic streams that end early (cleanly): after message_start, and before it.
    if want("anthropic_no_stop"):
        body = an_text("MiniMax-M2.7")
        save("anthropic_no_stop", rec("x", "minimax", "MiniMax-M2.7", [Reply(body[:body.index("event: message_stop")])],
                                      ["hello"], "off", settings=NORETRY))
    if want("anthropic_no_start"):
        save("anthropic_no_start", rec("x", "minimax", "MiniMax-M2.7", [Reply("event: ping\ndata: {\"type\":\"ping\"}\n\n")],
                                       ["hello"], "off", settings=NORETRY))

    # Stream details of openai-completions (one provider, every case).
    P, M = "deepseek", "deepseek-v4-flash"

    def one(name, body, status=200, ctype="text/event-stream", thinking="high", then=None):
        # pi's OpenAI SDK retries 429 and 5xx twice by itself: the same answer three times.
        replies = [Reply(body, status, ctype=ctype)] * (3 if status in (429, 500, 502, 503) else 1)
        if then:
            replies.append(Reply(then))
        if want(name):
            save(name, rec(name, P, M, replies, ["hello"], thinking, settings=NORETRY))

    one("stream_interleaved",
        chunk(M, {"role": "assistant", "content": "First "}) + chunk(M, {"reasoning_content": "think"})
        + chunk(M, {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":"}}]})
        + chunk(M, {"content": "second "}) + chunk(M, {"reasoning_content": " more"})
        + chunk(M, {"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "bash"}}]})
        + chunk(M, {"tool_calls": [{"index": 0, "function": {"arguments": "\"ls\"}"}}]})
        + chunk(M, {"tool_calls": [{"index": 1, "function": {"arguments": "{\"command\":\"pwd\"}"}}]})
        + chunk(M, {"tool_calls": [{"id": "call_c", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"true\"}"}}]})
        + chunk(M, {}, "tool_calls") + chunk(M, choices=False, usage=USAGE1) + DONE, then=cc_text(M))
    one("stream_reasoning_fields",
        chunk(M, {"role": "assistant", "reasoning_text": "one"}) + chunk(M, {"reasoning_content": " two", "reasoning": " dup"})
        + chunk(M, {"reasoning": "", "reasoning_content": "", "reasoning_text": " three"}) + chunk(M, {"content": "Answer."})
        + chunk(M, {}, "stop", choice_usage={"prompt_tokens": 10, "completion_tokens": 3}) + DONE)
    one("stream_content_filter", chunk(M, {"content": "Partial"}) + chunk(M, {}, "content_filter") + DONE)
    one("stream_unknown_finish", chunk(M, {"content": "Partial"}) + chunk(M, {}, "insufficient_system_resource") + chunk(M, choices=False, usage=USAGE2) + DONE)
    one("stream_error_chunk", chunk(M, {"content": "Partial"})
        + 'data: {"error":{"message":"Upstream failed","code":502,"metadata":{"raw":"upstream said no","provider_name":"X"}}}\n\n')
    one("stream_no_finish", chunk(M, {"reasoning_content": "hmm"}) + chunk(M, {"content": "Cut short"}))
    one("stream_cache_write", chunk(M, {"content": "ok"}) + chunk(M, {}, "stop")
        + chunk(M, choices=False, usage={"prompt_tokens": 1000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 200}}) + DONE)
    one("error_400", '{"error":{"message":"Invalid request: bad field","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}', 400, J)
    one("error_429", '{"error":{"message":"Rate limit reached","type":"rate_limit","metadata":{"raw":"upstream 429 body"}}}', 429, J)
    one("error_503", "upstream connect error", 503, "text/plain")

    # ------------------------------------------------------------ models.json compat flags
    # Flags no built-in model sets, on models defined in models.json (the fixture carries it).
    PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

    def custom(name, provider, api, path, model_def, replies, prompts, thinking=None, env=None, tools="bash", cwd_files=None, compat=None):
        if not want(name):
            return
        base = "http://127.0.0.1:{PORT}" + path
        prov = {"baseUrl": base, "api": api, "apiKey": "key-" + provider, "models": [model_def]}
        if compat:
            prov["compat"] = compat
        mj = json.dumps({"providers": {provider: prov}})
        d = record(extract, provider, model_def["id"], dict(env or {}), replies, prompts, {"agent/models.json": mj}, NORETRY,
                   thinking, cwd_files=cwd_files, args=["--tools", tools, "--system-prompt", "You are a test agent."])
        d["modelsJson"] = mj
        for t in d["turns"]:
            t.pop("message", None)
        save(name, d)

    def read_turn(model):
        s = chunk(model, {"role": "assistant", "content": ""})
        s += chunk(model, {"tool_calls": [{"index": 0, "id": "call_r", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"dot.png\"}"}}]})
        return s + chunk(model, {}, "tool_calls") + chunk(model, choices=False, usage=USAGE1) + DONE

    ERR400 = Reply('{"error":{"message":"bad","type":"invalid_request_error"}}', 400, ctype=J)
    custom("custom_toolname", "cc1", "openai-completions", "/v1",
           {"id": "m-vision", "reasoning": True, "input": ["text", "image"],
            "compat": {"requiresToolResultName": True, "requiresAssistantAfterToolResult": True, "supportsUsageInStreaming": False,
                       "maxTokensField": "max_tokens", "supportsStrictMode": False, "supportsDeveloperRole": False}},
           [Reply(read_turn("m-vision")), ERR400, Reply(cc_text("m-vision", None))], ["Look at dot.png", "again"],
           thinking="low", tools="read", cwd_files={"dot.png": PNG})
    custom("custom_thinking_text", "cc2", "openai-completions", "/v1",
           {"id": "m-think", "reasoning": True, "compat": {"requiresThinkingAsText": True, "thinkingFormat": "qwen-chat-template"}},
           [Reply(cc_tool("m-think")), Reply(cc_text("m-think"))], TOOL, thinking="medium")
    custom("custom_cache", "cc3", "openai-completions", "/v1",
           {"id": "m-cache", "reasoning": True,
            "compat": {"cacheControlFormat": "anthropic", "supportsLongCacheRetention": False, "sendSessionAffinityHeaders": True,
                       "zaiToolStream": True, "thinkingFormat": "zai"}},
           [Reply(cc_tool("m-cache")), Reply(cc_text("m-cache"))], TOOL, thinking="high", env={"PI_CACHE_RETENTION": "long"})
    custom("custom_vercel", "cc4", "openai-completions", "/ai-gateway.vercel.sh/v1",
           {"id": "m-gw", "compat": {"vercelGatewayRouting": {"only": ["anthropic"], "order": ["bedrock", "anthropic"]}}},
           [Reply(cc_text("m-gw", None)), Reply(cc_text("m-gw", None))], TWO)
    custom("custom_openrouter", "cc5", "openai-completions", "/openrouter.ai/api/v1",
           {"id": "m-or", "reasoning": True, "thinkingLevelMap": {"off": "minimal"},
            "compat": {"openRouterRouting": {"only": ["x"], "allow_fallbacks": False}}},
           [Reply(cc_text("m-or", "reasoning")), Reply(cc_text("m-or", "reasoning"))], TWO, thinking="off")
    custom("custom_openai_off", "cc6", "openai-completions", "/api.openai.com/v1",
           {"id": "m-oai", "reasoning": True, "thinkingLevelMap": {"off": "none", "minimal": None}},
           [Reply(cc_text("m-oai", None)), Reply(cc_text("m-oai", None))], TWO, thinking="off",
           compat={"supportsStore": True})
    custom("custom_anthropic", "ac1", "anthropic-messages", "",
           {"id": "claude-custom", "reasoning": True, "input": ["text", "image"],
            "compat": {"supportsEagerToolInputStreaming": False, "supportsLongCacheRetention": False}},
           [Reply(an_tool("claude-custom")), Reply(an_text("claude-custom"))], TOOL, thinking="minimal", env={"PI_CACHE_RETENTION": "long"})
    custom("custom_responses", "rc1", "openai-responses", "/v1",
           {"id": "gpt-custom", "reasoning": True, "compat": {"sendSessionIdHeader": False, "supportsLongCacheRetention": False}},
           [Reply(resp_tool_turn()), Reply(resp_text_turn())], TOOL, thinking="low", env={"PI_CACHE_RETENTION": "long"})
