"""Record fixtures: pi's requests, response bytes and resulting messages, for one provider."""
import base64, json, os, sys
from cap import *

def contexts(events, keep_system=False):
    """For each assistant message_end, the messages that ended before it and its stream events
    ([type, contentIndex, delta] of every message_update). pi 0.87.1's role:"system" messages
    are not conversation: they are left out of the context (their tools are the turn's tools,
    see declared_tools), unless keep_system (then they are, and each turn's tools are those its
    context declares)."""
    msgs, out, updates = [], [], []
    for e in events:
        if e.get("type") == "message_end" and e["message"].get("role") == "system":
            if keep_system:
                msgs.append(e["message"])
            continue
        if e.get("type") == "message_start":
            updates = []
        if e.get("type") == "message_update":
            a = e.get("assistantMessageEvent", {})
            updates.append([a.get("type"), a.get("contentIndex"), a.get("delta")])
        if e.get("type") == "message_end":
            m = e["message"]
            if m["role"] == "assistant":
                raw = e.get("_raw", "")
                prefix = '{"type":"message_end","message":'
                assert raw.startswith(prefix) and raw.endswith("}"), raw[:80]
                out.append((list(msgs), m, raw[len(prefix):-1], updates))
            msgs.append(m)
    return out

def current_tools(msgs):
    """The tools the system messages among msgs leave active (pi's getCurrentTools)."""
    tools = []
    for m in msgs:
        if m.get("role") != "system":
            continue
        gone = {r["name"] for r in m.get("toolsRemoved", [])}
        tools = [t for t in tools if t["name"] not in gone]
        for t in m.get("toolsAdded", []):
            tools = [x for x in tools if x["name"] != t["name"]] + [t]
    return tools

def declared_tools(events):
    """pi 0.87.1: the tools its role:"system" messages declare (with constrainedSampling), or
    None for pi 0.73.1."""
    tools = None
    for e in events:
        if e.get("type") == "message_end" and e["message"].get("role") == "system":
            m = e["message"]
            tools = [t for t in (tools or []) if t["name"] not in {r["name"] for r in m.get("toolsRemoved", [])}]
            for t in m.get("toolsAdded", []):
                tools = [x for x in tools if x["name"] != t["name"]] + [t]
    return tools

def record(extract, provider, model, env, replies, prompts, files=None, settings=None, thinking=None, cwd_files=None, keep_system=False, args=None):
    files = dict(files or {})
    if settings:
        files["agent/settings.json"] = json.dumps(settings)
    events, reqs, err = run_pi(["--provider", provider, "--model", model] + (["--thinking", thinking] if thinking else []) + (args or []),
                               env, replies, prompts, files=files, cwd_files=cwd_files)
    ctxs = contexts(events, keep_system)
    declared = declared_tools(events)
    turns = []
    for i, (ctx, msg, raw, updates) in enumerate(ctxs):
        r = reqs[i] if i < len(reqs) else None
        rep = replies[i] if i < len(replies) else None
        turn = {"messages": ctx, "message": msg, "messageJson": raw, "updates": updates}
        if r is not None:
            body = r["body"]
            sp, tools = extract(json.loads(body)) if body else ("", [])
            turn["systemPrompt"] = sp
            turn["tools"] = current_tools(ctx) if keep_system else (declared if declared is not None else tools)
            hdr = dict(r["headers"])
            for k in ("x-affinity", "session_id", "x-client-request-id", "x-session-id", "x-session-affinity"):
                if k in hdr:
                    turn["sessionId"] = hdr[k]
                    break
            if "sessionId" not in turn and body:
                pk = json.loads(body).get("prompt_cache_key")
                if pk:
                    turn["sessionId"] = pk
            turn["request"] = {"method": r["method"], "path": r["path"], "headers": r["headers"], "body": body}
        if rep is not None:
            turn["response"] = {"status": rep.status, "headers": rep.headers,
                                "bodyBase64": base64.b64encode(rep.body).decode()}
        turns.append(turn)
    out = {"provider": provider, "model": model, "thinking": thinking, "env": {k: v for k, v in env.items()}, "turns": turns, "requests": len(reqs)}
    if declared is not None:
        out["pi"] = "0.87.1"
    return out
