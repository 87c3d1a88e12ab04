// pith's stand-in for pi-coding-agent's run-time exports that extensions use.
import { homedir } from "node:os";
import { join } from "node:path";
import * as self from "./pi-coding-agent.mjs";
export { Type } from "./typebox.mjs";
export { StringEnum } from "./pi-ai.mjs";

export const isToolCallEventType = (toolName, event) => event?.toolName === toolName;
export const defineTool = (tool) => tool;
export const DEFAULT_MAX_BYTES = 50 * 1024;
export const DEFAULT_MAX_LINES = 2000;

export function formatSize(b) {
	return b < 1024 ? `${b}B` : b < 1024 * 1024 ? `${(b / 1024).toFixed(1)}KB` : `${(b / (1024 * 1024)).toFixed(1)}MB`;
}

// pi's output truncation: whole lines; from the end, a last line longer than the limit keeps its end.
function truncate(content, o, fromEnd) {
	const maxLines = o?.maxLines ?? DEFAULT_MAX_LINES;
	const maxBytes = o?.maxBytes ?? DEFAULT_MAX_BYTES;
	const bytes = (s) => Buffer.byteLength(s);
	const lines = content ? content.split("\n") : [];
	if (content.endsWith("\n")) lines.pop();
	const r = { content, truncated: false, truncatedBy: null, totalLines: lines.length, totalBytes: bytes(content) };
	Object.assign(r, { outputLines: lines.length, outputBytes: r.totalBytes, lastLinePartial: false, firstLineExceedsLimit: false, maxLines, maxBytes });
	if (lines.length <= maxLines && r.totalBytes <= maxBytes) return r;
	if (!fromEnd && bytes(lines[0]) > maxBytes) {
		return { ...r, content: "", truncated: true, truncatedBy: "bytes", outputLines: 0, outputBytes: 0, firstLineExceedsLimit: true };
	}
	const kept = [];
	let size = 0;
	let by = "lines";
	for (let i = 0; i < lines.length && kept.length < maxLines; i++) {
		const line = lines[fromEnd ? lines.length - 1 - i : i];
		const b = bytes(line) + (kept.length ? 1 : 0);
		if (size + b > maxBytes) {
			by = "bytes";
			if (fromEnd && !kept.length) {
				const buf = Buffer.from(line);
				let at = buf.length - maxBytes;
				while (at < buf.length && (buf[at] & 0xc0) === 0x80) at++;
				kept.push(buf.subarray(at).toString());
				r.lastLinePartial = true;
			}
			break;
		}
		kept.push(line);
		size += b;
	}
	if (kept.length >= maxLines && size <= maxBytes) by = "lines";
	const out = (fromEnd ? kept.reverse() : kept).join("\n");
	return { ...r, content: out, truncated: true, truncatedBy: by, outputLines: kept.length, outputBytes: bytes(out) };
}
export const truncateHead = (content, o) => truncate(content, o, false);
export const truncateTail = (content, o) => truncate(content, o, true);

// As pi: PI_CODING_AGENT_DIR (a leading ~ expanded), else ~/.pi/agent.
export function getAgentDir() {
	const d = process.env.PI_CODING_AGENT_DIR;
	return d ? d.replace(/^~(?=$|\/)/, homedir()) : join(homedir(), ".pi", "agent");
}

// The TUI's theme getters: styling that does nothing (RPC mode renders nothing).
const plain = () => new Proxy({}, { get: (_, k) => (typeof k === "symbol" ? undefined : (text) => text) });
export const getSelectListTheme = plain;
export const getSettingsListTheme = plain;
export const getMarkdownTheme = plain;
export default self;
