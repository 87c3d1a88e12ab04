import json
def sse(events):
    return "".join("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e, separators=(",", ":"), ensure_ascii=False)) for e in events)

def tool_turn(resp_id="resp_1"):
    rs = {"id": "rs_abc", "type": "reasoning", "summary": []}
    ev = [
        {"type": "response.created", "sequence_number": 0, "response": {"id": resp_id, "object": "response", "status": "in_progress", "output": [], "usage": None}},
        {"type": "response.output_item.added", "output_index": 0, "item": rs},
        {"type": "response.reasoning_summary_part.added", "item_id": "rs_abc", "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}},
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs_abc", "output_index": 0, "summary_index": 0, "delta": "I should run"},
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs_abc", "output_index": 0, "summary_index": 0, "delta": " a command."},
        {"type": "response.reasoning_summary_part.done", "item_id": "rs_abc", "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": "I should run a command."}},
        {"type": "response.output_item.done", "output_index": 0, "item": {"id": "rs_abc", "type": "reasoning", "encrypted_content": "gAAAAenc", "summary": [{"type": "summary_text", "text": "I should run a command."}]}},
        {"type": "response.output_item.added", "output_index": 1, "item": {"id": "msg_1", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}},
        {"type": "response.content_part.added", "item_id": "msg_1", "output_index": 1, "content_index": 0, "part": {"type": "output_text", "annotations": [], "text": ""}},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "Running "},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "it."},
        {"type": "response.output_item.done", "output_index": 1, "item": {"id": "msg_1", "type": "message", "status": "completed", "content": [{"type": "output_text", "annotations": [], "text": "Running it."}], "role": "assistant"}},
        {"type": "response.output_item.added", "output_index": 2, "item": {"id": "fc_1", "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_1", "name": "bash"}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": "{\"command\":\"ec"},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": "ho hi\"}"},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 2, "arguments": "{\"command\":\"echo hi\"}"},
        {"type": "response.output_item.done", "output_index": 2, "item": {"id": "fc_1", "type": "function_call", "status": "completed", "arguments": "{\"command\":\"echo hi\"}", "call_id": "call_1", "name": "bash"}},
        {"type": "response.completed", "response": {"id": resp_id, "object": "response", "status": "completed", "usage": {"input_tokens": 812, "input_tokens_details": {"cached_tokens": 300}, "output_tokens": 31, "output_tokens_details": {"reasoning_tokens": 10}, "total_tokens": 843}}},
    ]
    return sse(ev)

def text_turn(resp_id="resp_2"):
    ev = [
        {"type": "response.created", "response": {"id": resp_id, "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_2", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}},
        {"type": "response.content_part.added", "item_id": "msg_2", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "annotations": [], "text": ""}},
        {"type": "response.output_text.delta", "item_id": "msg_2", "output_index": 0, "content_index": 0, "delta": "The output "},
        {"type": "response.output_text.delta", "item_id": "msg_2", "output_index": 0, "content_index": 0, "delta": "was hi. 😀 中文"},
        {"type": "response.output_item.done", "output_index": 0, "item": {"id": "msg_2", "type": "message", "status": "completed", "content": [{"type": "output_text", "annotations": [], "text": "The output was hi. 😀 中文"}], "role": "assistant", "phase": "final_answer"}},
        {"type": "response.completed", "response": {"id": resp_id, "status": "completed", "usage": {"input_tokens": 900, "output_tokens": 12, "total_tokens": 912}}},
    ]
    return sse(ev)

def incomplete_turn():
    ev = [
        {"type": "response.created", "response": {"id": "resp_3", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_3", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}},
        {"type": "response.content_part.added", "item_id": "msg_3", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "annotations": [], "text": ""}},
        {"type": "response.output_text.delta", "item_id": "msg_3", "output_index": 0, "content_index": 0, "delta": "Trunc"},
        {"type": "response.incomplete", "response": {"id": "resp_3", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "usage": {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}}},
    ]
    return sse(ev)

def failed_turn():
    ev = [
        {"type": "response.created", "response": {"id": "resp_4", "status": "in_progress"}},
        {"type": "response.failed", "response": {"id": "resp_4", "status": "failed", "error": {"code": "server_error", "message": "The model failed."}}},
    ]
    return sse(ev)
