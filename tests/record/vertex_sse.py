import json
def sse(chunks):
    return "".join("data: %s\r\n\r\n" % json.dumps(c, separators=(",", ":"), ensure_ascii=False) for c in chunks)
def tool_turn():
    return sse([
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "I should run", "thought": True}]}}], "usageMetadata": {"promptTokenCount": 812, "totalTokenCount": 812}, "modelVersion": "gemini-2.5-pro", "responseId": "resp-vtx-1"},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": " a command.", "thought": True, "thoughtSignature": "c2lnLXRob3VnaHQ="}]}}], "responseId": "resp-vtx-1"},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Running it."}]}}], "responseId": "resp-vtx-1"},
        {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "bash", "args": {"command": "echo hi"}}, "thoughtSignature": "c2lnLWNhbGw="}]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 812, "candidatesTokenCount": 21, "thoughtsTokenCount": 10, "cachedContentTokenCount": 300, "totalTokenCount": 843}, "responseId": "resp-vtx-1"},
    ])
def text_turn():
    return sse([
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "The output "}]}}], "responseId": "resp-vtx-2"},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "was hi. 😀 中文"}]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 12, "totalTokenCount": 912}, "responseId": "resp-vtx-2"},
    ])
def max_turn():
    return sse([{"candidates": [{"content": {"role": "model", "parts": [{"text": "Trunc"}]}, "finishReason": "MAX_TOKENS"}], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 7, "totalTokenCount": 12}}])
def safety_turn():
    return sse([{"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "SAFETY"}], "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5}}])
