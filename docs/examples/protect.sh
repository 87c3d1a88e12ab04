#!/bin/sh
# protect.sh: a pith extension in POSIX shell (no jq, no bash-isms).
#
# Load it with `pith --mode rpc -e docs/examples/protect.sh` (or list it in settings.json
# "extensions"). It speaks pith's extension protocol, version 1 (docs/extensions.md): one JSON
# object per line on stdin and stdout; anything for humans goes to stderr.
#
# What it does:
#   - blocks bash tool calls whose command contains `rm -rf` (event tool_call), with a reason
#     the model reads, and counts them in a status line (ui setStatus);
#   - asks the host to confirm before the session is switched or replaced (event
#     session_before_switch, ui confirm); not confirmed → the switch is cancelled;
#   - registers a tool, `clock` (the current UTC time), and a command, `/protect` (a notify
#     saying what it blocked).
#
# Shell has no JSON parser, so it relies on what the protocol guarantees: pith writes the
# leading keys of each message in a fixed order (`{"type":"event","id":7,"event":{"type":...`),
# so a `case` pattern recognises a message and `sed` takes its id.

set -u
nl='
'
pending=''   # messages read while waiting for a dialog answer, handled afterwards
blocked=0
asked=0

send() { printf '%s\n' "$1"; }

# The id of a call: `{"type":"<kind>","id":<n>,...`.
call_id() { printf '%s\n' "$1" | sed -n 's/^{"type":"[a-z_]*","id":\([0-9]*\).*/\1/p'; }

# The next message in $line: the backlog first, then stdin. Fails at end of input.
next() {
	if [ -n "$pending" ]; then
		line=${pending%%"$nl"*}
		pending=${pending#*"$nl"}
		return 0
	fi
	IFS= read -r line
}

# Wait for the answer to dialog $1; it lands in $answer. Other messages wait in the backlog.
await_answer() {
	while IFS= read -r l; do
		case $l in
		"{\"type\":\"ui_response\",\"id\":\"$1\""*)
			answer=$l
			return 0
			;;
		*) pending="$pending$l$nl" ;;
		esac
	done
	answer=''
	return 1
}

on_tool_call() {
	id=$(call_id "$1")
	case $1 in
	*'"toolName":"bash"'*'rm -rf'*)
		blocked=$((blocked + 1))
		send '{"type":"ui","method":"setStatus","statusKey":"protect","statusText":"blocked '"$blocked"'"}'
		send '{"type":"result","id":'"$id"',"result":{"block":true,"reason":"protect: rm -rf is not allowed here"}}'
		;;
	*)
		send '{"type":"result","id":'"$id"',"result":{}}'
		;;
	esac
}

on_before_switch() {
	id=$(call_id "$1")
	asked=$((asked + 1))
	send '{"type":"ui","method":"confirm","id":"switch-'"$asked"'","title":"Leave this session?","message":"protect asks before every session switch."}'
	await_answer "switch-$asked"
	case $answer in
	*'"confirmed":true'*) send '{"type":"result","id":'"$id"',"result":{"cancel":false}}' ;;
	*) send '{"type":"result","id":'"$id"',"result":{"cancel":true}}' ;;
	esac
}

# Wait for pith's hello, then register.
next || exit 0
case $line in
'{"type":"hello","protocol":1,'*) ;;
*)
	echo "protect.sh: pith does not speak protocol 1" >&2
	exit 1
	;;
esac
send '{"type":"register","protocol":1,"name":"protect","tools":[{"name":"clock","description":"The current date and time (UTC, ISO 8601).","parameters":{"type":"object","properties":{}}}],"commands":[{"name":"protect","description":"Say what protect blocks"}],"events":["tool_call","session_before_switch"]}'

while next; do
	case $line in
	'{"type":"event","id":'*'"event":{"type":"tool_call"'*) on_tool_call "$line" ;;
	'{"type":"event","id":'*'"event":{"type":"session_before_switch"'*) on_before_switch "$line" ;;
	'{"type":"event","id":'*)
		send '{"type":"result","id":'"$(call_id "$line")"'}'
		;;
	'{"type":"execute_tool","id":'*'"toolName":"clock"'*)
		now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
		send '{"type":"result","id":'"$(call_id "$line")"',"result":{"content":[{"type":"text","text":"'"$now"'"}]}}'
		;;
	'{"type":"execute_tool","id":'*)
		send '{"type":"result","id":'"$(call_id "$line")"',"error":"protect has no such tool"}'
		;;
	'{"type":"command","id":'*)
		send '{"type":"ui","method":"notify","message":"protect: rm -rf is blocked ('"$blocked"' so far); session switches need a confirmation","notifyType":"info"}'
		send '{"type":"result","id":'"$(call_id "$line")"'}'
		;;
	*) ;; # notifications, cancel, stray answers: nothing to do
	esac
done
