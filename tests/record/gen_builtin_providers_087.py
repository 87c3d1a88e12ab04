"""Record pi 0.87.1 on the built-in providers of pi 0.73.1 (with 0.87.1's models): fixtures/087/builtin/<name>.json,
replayed under `--compat 0.87` by tests/providers_recorded_087.rs.

  PI=/path/to/pi-0.87.1 DIST=/path/to/@earendil-works/pi-ai/dist python3 gen_builtin_providers_087.py OUTDIR [name-prefix]

The same scenarios as gen_builtin_providers.py (whose helpers this uses): each provider's base URL is
the fake's address followed by the real URL without its scheme, so pi's URL-based detection applies.
"""
import json, os, sys
import gen_builtin_providers as g
from gen import Reply
from resp_sse import tool_turn as resp_tool_turn, text_turn as resp_text_turn
from vertex_sse import tool_turn as gem_tool_turn, text_turn as gem_text_turn

g.KEY.update({"groq": "GROQ_API_KEY", "cerebras": "CEREBRAS_API_KEY", "xai": "XAI_API_KEY",
              # The providers pi 0.87.1 added.
              "nvidia": "NVIDIA_API_KEY", "ant-ling": "ANT_LING_API_KEY", "qwen-token-plan": "QWEN_TOKEN_PLAN_API_KEY",
              "qwen-token-plan-cn": "QWEN_TOKEN_PLAN_CN_API_KEY", "qwen-token-plan-individual": "QWEN_TOKEN_PLAN_API_KEY",
              "together": "TOGETHER_API_KEY", "zai-coding-cn": "ZAI_CODING_CN_API_KEY", "meta": "META_API_KEY"})

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
            save(name, g.rec(name, p, m, [Reply(g.cc_tool(m, rf, **kw)), Reply(g.cc_text(m, rf))], TOOL, thinking, env))

    def two_cc(name, p, m, rf=None, thinking=None, env=None):
        if want(name):
            save(name, g.rec(name, p, m, [Reply(g.cc_text(m, rf)), Reply(g.cc_text(m, rf))], TWO, thinking, env))

    def tool_an(name, p, m, thinking=None, env=None, think=True):
        if want(name):
            save(name, g.rec(name, p, m, [Reply(g.an_tool(m, think)), Reply(g.an_text(m))], TOOL, thinking, env))

    def tool_resp(name, p, m, thinking=None, env=None):
        if want(name):
            save(name, g.rec(name, p, m, [Reply(resp_tool_turn()), Reply(resp_text_turn())], TOOL, thinking, env))

    # openai-completions.
    tool_cc("deepseek_tool", "deepseek", "deepseek-flash", thinking="high",
            usage={"prompt_tokens": 812, "completion_tokens": 31, "prompt_cache_hit_tokens": 300, "prompt_cache_miss_tokens": 512})
    two_cc("deepseek_off", "deepseek", "deepseek-v4-pro", thinking="off")
    tool_cc("deepseek_max", "deepseek", "deepseek-v4-pro", thinking="max")
    tool_cc("zai_tool", "zai", "glm-4.7", thinking="medium")
    two_cc("zai_off", "zai", "glm-5.2", thinking="off")
    tool_cc("moonshot_tool", "moonshotai", "kimi-k2.6", thinking="low", usage_in_choice=True)
    two_cc("moonshotcn_text", "moonshotai-cn", "kimi-k3", rf="reasoning_content")
    tool_cc("hf_tool", "huggingface", "Qwen/Qwen3-32B", rf="reasoning", thinking="medium")
    two_cc("hf_plain", "huggingface", "Qwen/Qwen2.5-Coder-32B-Instruct")
    tool_cc("cf_workers_tool", "cloudflare-workers-ai", "@cf/openai/gpt-oss-120b", rf="reasoning", thinking="high", env=g.CF)
    tool_cc("cf_gateway_compat", "cloudflare-ai-gateway", "workers-ai/@cf/zai-org/glm-4.7-flash", thinking="medium", env=g.CF)
    tool_an("cf_gateway_anthropic", "cloudflare-ai-gateway", "claude-sonnet-4.5", "medium", g.CF)
    tool_cc("opencode_cc", "opencode", "glm-5.1", thinking="medium")
    tool_an("opencode_anthropic", "opencode", "claude-opus-4-7", thinking="xhigh")
    tool_cc("opencodego_deepseek", "opencode-go", "deepseek-v4-flash", thinking="xhigh")
    tool_cc("opencodego_qwen", "opencode-go", "qwen3.6-plus", thinking="medium")
    tool_cc("openrouter_deepseek", "openrouter", "deepseek/deepseek-v4-pro", thinking="high")
    two_cc("openrouter_off", "openrouter", "deepseek/deepseek-v4-pro", rf=None, thinking="off")
    tool_an("openrouter_claude", "openrouter", "anthropic/claude-sonnet-4.5", thinking="medium")
    tool_cc("xiaomi_tool", "xiaomi", "mimo-v2.5-pro", thinking="medium")
    two_cc("xiaomi_cn_off", "xiaomi-token-plan-cn", "mimo-v2.5", thinking="off")
    tool_cc("groq_tool", "groq", "openai/gpt-oss-120b", rf="reasoning", thinking="high")
    two_cc("groq_plain", "groq", "llama-3.3-70b-versatile")
    tool_cc("cerebras_tool", "cerebras", "gpt-oss-120b", rf="reasoning", thinking="low")

    # The providers pi 0.87.1 added.
    tool_cc("nvidia_tool", "nvidia", "moonshotai/kimi-k2.6", thinking="medium")
    two_cc("nvidia_plain", "nvidia", "google/gemma-3-12b-it")
    tool_cc("antling_tool", "ant-ling", "Ring-2.6-1T", thinking="high")
    two_cc("antling_off", "ant-ling", "Ring-2.6-1T", thinking="off")
    tool_cc("qwentp_tool", "qwen-token-plan", "qwen3.8-flash", thinking="xhigh")
    two_cc("qwentpcn_off", "qwen-token-plan-cn", "deepseek-v4-pro", thinking="off")
    two_cc("qwentpi_plain", "qwen-token-plan-individual", "qwen3.7-plus")
    tool_cc("together_tool", "together", "MiniMaxAI/MiniMax-M2.7", thinking="medium")
    two_cc("together_off", "together", "deepseek-ai/DeepSeek-V4-Pro", thinking="off")
    tool_cc("zaicn_tool", "zai-coding-cn", "glm-5.3", thinking="high")
    tool_resp("meta_tool", "meta", "muse-spark-1.3", "medium")

    # anthropic-messages providers.
    tool_an("fireworks_tool", "fireworks", "accounts/fireworks/models/kimi-k2p6", "medium")
    tool_an("kimi_tool", "kimi-coding", "kimi-for-coding", "high")
    tool_an("minimax_tool", "minimax", "MiniMax-M2.7", "medium")
    tool_an("minimaxcn_tool", "minimax-cn", "MiniMax-M2.7-highspeed", "low")
    tool_an("vercel_qwen", "vercel-ai-gateway", "alibaba/qwen3.6-plus", "medium")

    # openai-responses providers.
    tool_resp("xai_tool", "xai", "grok-4.5", "high")
    tool_resp("opencode_responses", "opencode", "gpt-5.4", "high")
    tool_resp("cf_gateway_responses", "cloudflare-ai-gateway", "gpt-4.1", None, g.CF)
    # google-generative-ai through OpenCode.
    if want("opencode_google"):
        save("opencode_google", g.rec("x", "opencode", "gemini-3.1-pro", [Reply(gem_tool_turn()), Reply(gem_text_turn())], TOOL, "high"))

    # Stream details of openai-completions (one provider, every case).
    P, M = "deepseek", "deepseek-flash"

    def one(name, body, status=200, ctype="text/event-stream", thinking="high", then=None):
        replies = [Reply(body, status, ctype=ctype)]
        if then:
            replies.append(Reply(then))
        if want(name):
            save(name, g.rec(name, P, M, replies, ["hello"], thinking, settings=g.NORETRY))

    chunk, DONE = g.chunk, g.DONE
    one("stream_interleaved",
        chunk(M, {"role": "assistant", "content": "First "}) + chunk(M, {"reasoning_content": "think"})
        + chunk(M, {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":"}}]})
        + chunk(M, {"content": "second "}) + chunk(M, {"reasoning_content": " more"})
        + chunk(M, {"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "bash"}}]})
        + chunk(M, {"tool_calls": [{"index": 0, "function": {"arguments": "\"ls\"}"}}]})
        + chunk(M, {"tool_calls": [{"index": 1, "function": {"arguments": "{\"command\":\"pwd\"}"}}]})
        + chunk(M, {"tool_calls": [{"id": "call_c", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"true\"}"}}]})
        + chunk(M, {}, "tool_calls") + chunk(M, choices=False, usage=g.USAGE1) + DONE, then=g.cc_text(M))
    one("stream_reasoning_fields",
        chunk(M, {"role": "assistant", "reasoning_text": "one"}) + chunk(M, {"reasoning_content": " two", "reasoning": " dup"})
        + chunk(M, {"reasoning": "", "reasoning_content": "", "reasoning_text": " three"}) + chunk(M, {"content": "Answer."})
        + chunk(M, {}, "stop", choice_usage={"prompt_tokens": 10, "completion_tokens": 3}) + DONE)
    one("stream_content_filter", chunk(M, {"content": "Partial"}) + chunk(M, {}, "content_filter") + DONE)
    one("stream_unknown_finish", chunk(M, {"content": "Partial"}) + chunk(M, {}, "insufficient_system_resource") + chunk(M, choices=False, usage=g.USAGE2) + DONE)
    one("stream_error_chunk", chunk(M, {"content": "Partial"})
        + 'data: {"error":{"message":"Upstream failed","code":502,"metadata":{"raw":"upstream said no","provider_name":"X"}}}\n\n')
    one("stream_no_finish", chunk(M, {"reasoning_content": "hmm"}) + chunk(M, {"content": "Cut short"}))
    one("stream_cache_write", chunk(M, {"content": "ok"}) + chunk(M, {}, "stop")
        + chunk(M, choices=False, usage={"prompt_tokens": 1000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 200}}) + DONE)
    one("error_400", '{"error":{"message":"Invalid request: bad field","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}', 400, g.J)
    one("error_429", '{"error":{"message":"Rate limit reached","type":"rate_limit","metadata":{"raw":"upstream 429 body"}}}', 429, g.J)
    one("error_503", "upstream connect error", 503, "text/plain")

    # ------------------------------------------------------------ models.json compat flags
    # As gen_builtin_providers.py: flags no built-in model sets, on models defined in models.json.
    import base64
    from gen import record
    PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
    cc_tool, cc_text, an_tool, an_text = g.cc_tool, g.cc_text, g.an_tool, g.an_text

    def custom(name, provider, api, path, model_def, replies, prompts, thinking=None, env=None, tools="bash", cwd_files=None, compat=None):
        if not want(name):
            return
        base = "http://127.0.0.1:{PORT}" + path
        prov = {"baseUrl": base, "api": api, "apiKey": "key-" + provider, "models": [model_def]}
        if compat:
            prov["compat"] = compat
        mj = json.dumps({"providers": {provider: prov}})
        d = record(g.extract, provider, model_def["id"], dict(env or {}), replies, prompts, {"agent/models.json": mj}, g.NORETRY,
                   thinking, cwd_files=cwd_files, args=["--tools", tools, "--system-prompt", "You are a test agent."])
        d["modelsJson"] = mj
        for t in d["turns"]:
            t.pop("message", None)
        save(name, d)

    def read_turn(model):
        s = chunk(model, {"role": "assistant", "content": ""})
        s += chunk(model, {"tool_calls": [{"index": 0, "id": "call_r", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"dot.png\"}"}}]})
        return s + chunk(model, {}, "tool_calls") + chunk(model, choices=False, usage=g.USAGE1) + DONE

    ERR400 = Reply('{"error":{"message":"bad","type":"invalid_request_error"}}', 400, ctype=g.J)
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
    custom("custom_together", "cc7", "openai-completions", "/api.together.ai/v1",
           {"id": "m-tog", "reasoning": True},
           [Reply(cc_tool("m-tog")), Reply(cc_text("m-tog"))], TOOL, thinking="medium")
    custom("custom_nofinish", "cc8", "openai-completions", "/v1",
           {"id": "m-nf", "compat": {"supportsFinishReason": False, "sendSessionAffinityHeaders": True, "sessionAffinityFormat": "openai-nosession"}},
           [Reply(chunk("m-nf", {"role": "assistant", "content": "No finish."}) + DONE)], ["hello"])
    custom("custom_anthropic", "ac1", "anthropic-messages", "",
           {"id": "claude-custom", "reasoning": True, "input": ["text", "image"],
            "compat": {"supportsEagerToolInputStreaming": False, "supportsLongCacheRetention": False}},
           [Reply(an_tool("claude-custom")), Reply(an_text("claude-custom"))], TOOL, thinking="minimal", env={"PI_CACHE_RETENTION": "long"})
    custom("custom_responses", "rc1", "openai-responses", "/v1",
           {"id": "gpt-custom", "reasoning": True, "compat": {"sendSessionIdHeader": False, "supportsLongCacheRetention": False}},
           [Reply(resp_tool_turn()), Reply(resp_text_turn())], TOOL, thinking="low", env={"PI_CACHE_RETENTION": "long"})
