// pith's stand-in for pi-coding-agent's run-time exports that extensions use.
import { homedir } from "node:os";
import { join } from "node:path";
export { Type } from "./typebox.mjs";
export { StringEnum } from "./pi-ai.mjs";

export function isToolCallEventType(toolName, event) {
	return event?.toolName === toolName;
}

export const defineTool = (tool) => tool;

export const DEFAULT_MAX_BYTES = 50 * 1024;
export const DEFAULT_MAX_LINES = 2000;

export function formatSize(bytes) {
	if (bytes < 1024) return `${bytes}B`;
	if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)}KB`;
	return `${(bytes / (1024 * 1024)).toFixed(1)}MB`;
}

// pi's output truncation (whole lines; the tail keeps the end of a last line longer than the limit).
function truncate(content, options, fromEnd) {
	const maxLines = options?.maxLines ?? DEFAULT_MAX_LINES;
	const maxBytes = options?.maxBytes ?? DEFAULT_MAX_BYTES;
	const bytes = (s) => Buffer.byteLength(s, "utf-8");
	const totalBytes = bytes(content);
	const lines = content.length === 0 ? [] : content.split("\n");
	if (content.endsWith("\n")) lines.pop();
	const r = { content, truncated: false, truncatedBy: null, totalLines: lines.length, totalBytes };
	Object.assign(r, { outputLines: lines.length, outputBytes: totalBytes, lastLinePartial: false, firstLineExceedsLimit: false, maxLines, maxBytes });
	if (lines.length <= maxLines && totalBytes <= maxBytes) return r;
	if (!fromEnd && bytes(lines[0]) > maxBytes) {
		return { ...r, content: "", truncated: true, truncatedBy: "bytes", outputLines: 0, outputBytes: 0, firstLineExceedsLimit: true };
	}
	const kept = [];
	let size = 0;
	let by = "lines";
	for (let i = 0; i < lines.length && kept.length < maxLines; i++) {
		const line = lines[fromEnd ? lines.length - 1 - i : i];
		const b = bytes(line) + (kept.length > 0 ? 1 : 0);
		if (size + b > maxBytes) {
			by = "bytes";
			if (fromEnd && kept.length === 0) {
				const buf = Buffer.from(line, "utf-8");
				let start = buf.length - maxBytes;
				while (start < buf.length && (buf[start] & 0xc0) === 0x80) start++;
				kept.push(buf.subarray(start).toString("utf-8"));
				r.lastLinePartial = true;
			}
			break;
		}
		kept.push(line);
		size += b;
	}
	if (kept.length >= maxLines && size <= maxBytes) by = "lines";
	if (fromEnd) kept.reverse();
	const out = kept.join("\n");
	return { ...r, content: out, truncated: true, truncatedBy: by, outputLines: kept.length, outputBytes: bytes(out) };
}
export const truncateHead = (content, options) => truncate(content, options, false);
export const truncateTail = (content, options) => truncate(content, options, true);

// pi's agent dir, as pi finds it (PI_CODING_AGENT_DIR, else ~/.pi/agent).
export function getAgentDir() {
	const dir = process.env.PI_CODING_AGENT_DIR;
	if (dir) return dir === "~" ? homedir() : dir.startsWith("~/") ? join(homedir(), dir.slice(2)) : dir;
	return join(homedir(), ".pi", "agent");
}

// The TUI's theme helpers: styling is a no-op (RPC mode renders nothing).
const plain = () => new Proxy({}, { get: (_, k) => (typeof k === "symbol" ? undefined : (text) => text) });
export const getSelectListTheme = plain;
export const getSettingsListTheme = plain;
export const getMarkdownTheme = plain;

export default {
	isToolCallEventType,
	defineTool,
	DEFAULT_MAX_BYTES,
	DEFAULT_MAX_LINES,
	formatSize,
	truncateHead,
	truncateTail,
	getAgentDir,
	getSelectListTheme,
	getSettingsListTheme,
	getMarkdownTheme,
};
