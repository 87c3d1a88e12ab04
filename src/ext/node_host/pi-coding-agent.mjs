// pith's stand-in for pi-coding-agent's run-time exports that extensions use.
export { Type } from "./typebox.mjs";
export { StringEnum } from "./pi-ai.mjs";

export function isToolCallEventType(toolName, event) {
	return event?.toolName === toolName;
}

export const DEFAULT_MAX_BYTES = 50 * 1024;
export const DEFAULT_MAX_LINES = 2000;

export default { isToolCallEventType, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES };
