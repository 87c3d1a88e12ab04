def extract(b):
    sp = b.get("instructions", "")
    for it in b.get("input", []):
        if it.get("role") in ("system", "developer") and isinstance(it.get("content"), str):
            sp = it["content"]; break
    tools = [{"name": t["name"], "description": t["description"], "parameters": t["parameters"]} for t in b.get("tools", [])]
    return sp, tools

