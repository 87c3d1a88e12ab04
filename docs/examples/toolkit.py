#!/usr/bin/env python3
"""toolkit.py: a complete pith extension in Python, standard library only.

Load it with `pith --mode rpc -e docs/examples/toolkit.py` (or list it in settings.json
"extensions"). It speaks pith's extension protocol, version 1 (docs/extensions.md): JSON lines
on stdin/stdout, logs on stderr.

What it shows:
  - a tool the model can call, `count_words`, with a streamed partial result;
  - two slash commands: `/hello [name]` walks through every UI method (select, confirm, input,
    editor, notify, setStatus, setWidget, setTitle, set_editor_text) and adds a note to the
    conversation (send_message); `/pick [timeout-ms]` asks a question that times out;
  - a guard: bash tool calls containing `rm -rf` are blocked (tool_call);
  - a session switch (new_session, switch_session) must be confirmed (session_before_switch);
  - a status line per turn (turn_start, a notification: no answer expected).

The extension is single-threaded: it handles one message at a time. While it waits for the
host's answer to a dialog it keeps reading, and what arrives meanwhile waits in a backlog.
"""

import json
import sys

PROTOCOL = 1


class Pith:
    """The extension's end of the protocol."""

    def __init__(self):
        self.backlog = []
        self.next_ui_id = 0

    def send(self, message):
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def read(self):
        """The next message from pith, or None at end of input (pith is exiting)."""
        if self.backlog:
            return self.backlog.pop(0)
        while True:
            line = sys.stdin.readline()
            if not line:
                return None
            if line.strip():
                return json.loads(line)

    def ui(self, method, **fields):
        """A fire-and-forget UI method (notify, setStatus, setWidget, setTitle, set_editor_text)."""
        self.send(dict(type="ui", method=method, **fields))

    def dialog(self, method, **fields):
        """A dialog (select, confirm, input, editor): waits for pith's ui_response.

        Returns the response: {"value": ...} or {"cancelled": true} for select/input/editor,
        {"confirmed": bool} for confirm; "timedOut": true when the dialog's timeout passed.
        """
        self.next_ui_id += 1
        ui_id = "ui-%d" % self.next_ui_id
        self.send(dict(type="ui", method=method, id=ui_id, **fields))
        while True:
            line = sys.stdin.readline()
            if not line:
                return {"cancelled": True}
            if not line.strip():
                continue
            message = json.loads(line)
            if message.get("type") == "ui_response" and message.get("id") == ui_id:
                return message
            self.backlog.append(message)

    def result(self, call_id, result=None, error=None):
        message = {"type": "result", "id": call_id}
        if error is not None:
            message["error"] = error
        elif result is not None:
            message["result"] = result
        self.send(message)


def text(t):
    return [{"type": "text", "text": t}]


def count_words(pith, call):
    words = call["input"].get("text", "").split()
    pith.send({"type": "tool_update", "id": call["id"], "content": text("counting...")})
    pith.result(call["id"], {"content": text("%d words" % len(words)), "details": {"words": len(words)}})


def hello(pith, args):
    name = args.strip() or "world"
    color = pith.dialog("select", title="Pick a color", options=["red", "green", "blue"])
    ok = pith.dialog("confirm", title="Greet %s?" % name, message="A greeting will be shown.")
    if not ok.get("confirmed"):
        pith.ui("notify", message="No greeting today.", notifyType="warning")
        return
    nick = pith.dialog("input", title="A nickname?", placeholder="optional")
    note = pith.dialog("editor", title="A note", prefill="Dear %s,\n" % name)
    pith.ui("notify", message="Hello, %s!" % name, notifyType="info")
    pith.ui("setStatus", statusKey="toolkit", statusText="greeted %s" % name)
    pith.ui("setWidget", widgetKey="toolkit",
            widgetLines=["color: %s" % color.get("value"), "nickname: %s" % nick.get("value")],
            widgetPlacement="belowEditor")
    pith.ui("setTitle", title="pith - greeting %s" % name)
    pith.ui("set_editor_text", text=note.get("value") or "")
    pith.send({"type": "send_message",
               "message": {"customType": "toolkit-greeting", "content": "Greeted %s" % name,
                           "display": True, "details": {"color": color.get("value")}}})


def pick(pith, args):
    timeout = int(args) if args.strip().isdigit() else 10000
    answer = pith.dialog("select", title="Quick: which one?", options=["this", "that"], timeout=timeout)
    if answer.get("timedOut"):
        pith.ui("notify", message="pick: no answer in time", notifyType="warning")
    elif "value" in answer:
        pith.ui("notify", message="pick: %s" % answer["value"])
    else:
        pith.ui("notify", message="pick: dismissed")


def on_event(pith, event):
    """A blocking event returns its result; a notification returns None (and is not answered)."""
    kind = event["type"]
    if kind == "tool_call":
        command = event["input"].get("command", "") if event["toolName"] == "bash" else ""
        if "rm -rf" in command:
            pith.ui("notify", message="Blocked: %s" % command, notifyType="warning")
            return {"block": True, "reason": "toolkit: rm -rf is not allowed"}
        return {}
    if kind == "session_before_switch":
        answer = pith.dialog("confirm", title="Leave this session?",
                             message="reason: %s" % event.get("reason"))
        return {"cancel": not answer.get("confirmed")}
    if kind == "turn_start":
        pith.ui("setStatus", statusKey="toolkit", statusText="turn %d" % event["turnIndex"])
    return None


def main():
    pith = Pith()
    hello_message = pith.read()
    if hello_message is None or hello_message.get("protocol") != PROTOCOL:
        sys.stderr.write("toolkit: pith does not speak protocol %d\n" % PROTOCOL)
        return 1
    pith.send({
        "type": "register",
        "protocol": PROTOCOL,
        "name": "toolkit",
        "tools": [{
            "name": "count_words",
            "description": "Count the words of a text.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                           "required": ["text"]},
            "promptSnippet": "Count the words of a text",
        }],
        "commands": [
            {"name": "hello", "description": "Greet someone, using every UI method"},
            {"name": "pick", "description": "Ask a question that times out"},
        ],
        "events": ["tool_call", "session_before_switch", "turn_start"],
    })
    commands = {"hello": hello, "pick": pick}
    while True:
        message = pith.read()
        if message is None:
            return 0
        kind = message.get("type")
        try:
            if kind == "event":
                result = on_event(pith, message["event"])
                if "id" in message:
                    pith.result(message["id"], result)
            elif kind == "execute_tool":
                if message["toolName"] == "count_words":
                    count_words(pith, message)
                else:
                    pith.result(message["id"], error="unknown tool %s" % message["toolName"])
            elif kind == "command":
                commands[message["name"]](pith, message["args"])
                pith.result(message["id"])
        except Exception as e:  # an error answers the call instead of killing the extension
            if "id" in message:
                pith.result(message["id"], error="%s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    sys.exit(main())
