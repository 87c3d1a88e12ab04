// pith's node host for pi's TypeScript extensions (docs/extensions.md, "pi's TypeScript
// extensions"). pith writes this file (and the shims next to it) into a private temporary
// directory and runs it with node >= 22.18: node strips the types, this program loads each
// extension's default export with a pi-like `ExtensionAPI` and speaks pith's extension protocol
// (JSON lines) on stdin/stdout, as one extension. Logs go to stderr; stdout carries protocol lines
// only (console.log is sent to stderr).
//
// Environment: PITH_NODE_HOST_EXTENSIONS (a JSON array of absolute paths, in load order),
// PITH_PROJECT_TRUSTED ("1" or "0"), PITH_NODE_HOST_TIMEOUT_MS (a handler's time before this host
// gives up on it and reports it; pith's own per-call timeout is the backstop),
// PITH_NODE_HOST_FLAGS (the command line's flags for the extensions: [[name, value|null], ...]).

// First of all: a node too old to strip types says so, and pith stops (exit 2). This file is
// plain JavaScript that old nodes parse.
{
	const [major, minor] = process.versions.node.split(".").map(Number);
	const ok = (major === 22 && minor >= 18) || (major === 23 && minor >= 6) || major >= 24;
	if (!ok) {
		process.stdout.write(JSON.stringify({ type: "node_too_old", version: process.version }) + "\n");
		process.exit(0);
	}
}

import { createInterface } from "node:readline";
import { pathToFileURL, fileURLToPath } from "node:url";
import { spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import * as nodeModule from "node:module";
import * as fs from "node:fs";
import * as path from "node:path";

const out = process.stdout;
const log = (...a) => process.stderr.write(a.map(String).join(" ") + "\n");
// Extensions' console output must never reach stdout (the protocol channel).
console.log = console.info = console.debug = (...a) => log(...a.map((x) => (typeof x === "string" ? x : safeJson(x))));

function safeJson(v) {
	try {
		return JSON.stringify(v);
	} catch {
		return String(v);
	}
}

function send(msg) {
	out.write(JSON.stringify(msg) + "\n");
}

const here = path.dirname(fileURLToPath(import.meta.url));
const extensionPaths = JSON.parse(process.env.PITH_NODE_HOST_EXTENSIONS || "[]");
const projectTrusted = process.env.PITH_PROJECT_TRUSTED === "1";
const handlerTimeoutMs = Number(process.env.PITH_NODE_HOST_TIMEOUT_MS || "0") || 0;
// Long flags of pith's command line it does not know: [[name, value or null], ...] in order.
const cliFlags = JSON.parse(process.env.PITH_NODE_HOST_FLAGS || "[]");
// The flags' values, shared by every extension (pi's runtime `flagValues`).
const flagValues = new Map();

// ---- module resolution: pi's packages to the user's copies, else to pith's shims ----------------

const SHIMS = {
	typebox: "typebox.mjs",
	"@sinclair/typebox": "typebox.mjs",
	"@earendil-works/pi-ai": "pi-ai.mjs",
	"@mariozechner/pi-ai": "pi-ai.mjs",
	"@earendil-works/pi-coding-agent": "pi-coding-agent.mjs",
	"@mariozechner/pi-coding-agent": "pi-coding-agent.mjs",
	"@earendil-works/pi-tui": "pi-tui.mjs",
	"@mariozechner/pi-tui": "pi-tui.mjs",
};

function shimFor(specifier) {
	const f = SHIMS[specifier];
	return f ? pathToFileURL(path.join(here, f)).href : undefined;
}

const TS_CANDIDATES = [".ts", ".mts", ".js", "/index.ts", "/index.js"];

// pi's synchronous reads of the session (`ctx.sessionManager.getEntries()`, ...) need data pith
// does not send with every event: the host fetches it before each handler, but only once some
// module it loaded names one of them (most extensions never do, and pay nothing).
const SESSION_READS = /\b(sessionManager|getContextUsage|getSystemPrompt|getCommands)\b/;
let needsSnapshot = false;

function scanSource(url, source) {
	if (url.includes("/node_modules/")) return;
	if (!needsSnapshot && SESSION_READS.test(source)) needsSnapshot = true;
	if (!needsModels && MODEL_READS.test(source)) needsModels = true;
}

function resolveHook(specifier, context, nextResolve) {
	try {
		return nextResolve(specifier, context);
	} catch (e) {
		const shim = shimFor(specifier);
		if (shim) return { url: shim, shortCircuit: true };
		// jiti resolves extensionless relative imports (`./util` for `./util.ts`); node does not.
		if ((specifier.startsWith("./") || specifier.startsWith("../")) && context.parentURL?.startsWith("file:")) {
			const base = path.resolve(path.dirname(fileURLToPath(context.parentURL)), specifier);
			const stem = base.endsWith(".js") ? base.slice(0, -3) : base;
			for (const c of TS_CANDIDATES) {
				if (fs.existsSync(stem + c) && fs.statSync(stem + c).isFile()) {
					return { url: pathToFileURL(stem + c).href, shortCircuit: true };
				}
			}
		}
		throw e;
	}
}

// TypeScript in node's transform mode (enums, namespaces, parameter properties too), also under
// node_modules (an installed pi package ships .ts), without command-line flags (an old node
// must get as far as saying it is too old).
function loadHook(url, context, nextLoad) {
	if (url.startsWith("file:") && /\.m?ts$/.test(url)) {
		const source = fs.readFileSync(fileURLToPath(url), "utf8");
		scanSource(url, source);
		const code = nodeModule.stripTypeScriptTypes(source, { mode: "transform", sourceUrl: url });
		return { format: "module", source: code, shortCircuit: true };
	}
	if ((!needsSnapshot || !needsModels) && url.startsWith("file:") && /\.[mc]?js$/.test(url)) {
		try {
			scanSource(url, fs.readFileSync(fileURLToPath(url), "utf8"));
		} catch {}
	}
	return nextLoad(url, context);
}

// node's notice that type stripping is experimental is not the user's concern.
process.removeAllListeners("warning");
process.on("warning", (w) => {
	if (w.name !== "ExperimentalWarning") log(`${w.name}: ${w.message}`);
});

nodeModule.registerHooks({ resolve: resolveHook, load: loadHook });

// ---- the protocol -----------------------------------------------------------------------------

let hello = null;
// pith's state for the synchronous getters (`ctx.model`, `pi.getSessionName()`, ...), sent by
// pith before any other line when it changed.
let state = {};
const pendingApiCalls = new Map(); // call id -> {resolve, reject}
let nextApiCall = 1;

function apiCall(method, params) {
	const id = `c${nextApiCall++}`;
	return new Promise((resolve, reject) => {
		pendingApiCalls.set(id, { resolve, reject });
		send({ type: "call", id, method, params });
	});
}

// What the session reads answer (see SESSION_READS): fetched before handlers run.
let snapshot = null;
// pi's `getSettings()`: the effective settings, sent by pith before `hello`.
let settings = {};
// `ctx.modelRegistry`'s reads: pith's models, fetched before a handler runs (only once a loaded
// module names `modelRegistry`, and again only when pith's `state.models` generation moved).
const MODEL_READS = /\bmodelRegistry\b/;
let needsModels = false;
let models = null;

async function refreshModels() {
	if (!needsModels || (models && models.generation === state.models)) return;
	try {
		models = await apiCall("models", {});
		models.generation = state.models;
	} catch (e) {
		log(`pith node host: cannot read the models: ${errText(e)}`);
	}
}

async function refreshReads() {
	await refreshSnapshot();
	await refreshModels();
}

async function refreshSnapshot() {
	if (!needsSnapshot) return;
	try {
		// The session only grows: ask for the entries after the last one this host has.
		const last = snapshot?.entries?.at(-1);
		const params = last ? { since: last.id, sessionId: snapshot.sessionId } : {};
		const r = await apiCall("snapshot", params);
		if (r.append && snapshot) r.entries = snapshot.entries.concat(r.entries);
		snapshot = r;
	} catch (e) {
		log(`pith node host: cannot read the session: ${errText(e)}`);
	}
}

function snap(method) {
	if (!snapshot) throw new Error(`pith has no session data for ${method} here (docs/extensions.md)`);
	return snapshot;
}

function entriesById() {
	const s = snap("ctx.sessionManager");
	if (!s._byId) s._byId = new Map(s.entries.map((e) => [e.id, e]));
	return s._byId;
}

function labels() {
	const s = snap("ctx.sessionManager");
	if (!s._labels) {
		s._labels = new Map();
		for (const e of s.entries) {
			if (e.type !== "label") continue;
			if (e.label) s._labels.set(e.targetId, { label: e.label, timestamp: e.timestamp });
			else s._labels.delete(e.targetId);
		}
	}
	return s._labels;
}

function sessionTree() {
	const entries = snap("ctx.sessionManager.getTree()").entries;
	const nodes = new Map();
	const roots = [];
	for (const entry of entries) {
		const l = labels().get(entry.id);
		nodes.set(entry.id, { entry, children: [], label: l?.label, labelTimestamp: l?.timestamp });
	}
	for (const entry of entries) {
		const node = nodes.get(entry.id);
		const parent = entry.parentId === null || entry.parentId === entry.id ? undefined : nodes.get(entry.parentId);
		if (parent) parent.children.push(node);
		else roots.push(node);
	}
	const stack = [...roots];
	while (stack.length > 0) {
		const node = stack.pop();
		node.children.sort((a, b) => new Date(a.entry.timestamp).getTime() - new Date(b.entry.timestamp).getTime());
		stack.push(...node.children);
	}
	return roots;
}

// A call whose answer nobody awaits (pi's method returns nothing): a failure is reported.
function apiCallReported(ext, method, params) {
	apiCall(method, params).catch((e) => reportError(ext, method, errText(e)));
}
const extensions = []; // {path, name, handlers: Map<event, fn[]>, tools: [], commands: [], flags: Map, dead}
const tools = new Map(); // name -> {ext, def}
const commands = new Map(); // name -> {ext, def}
const pendingCalls = new Map(); // pith call id -> AbortController
const pendingDialogs = new Map(); // dialog id -> resolve
let nextDialog = 1;
const bus = new EventEmitter();

// pith's events, as pith names them (what `register.events` may list).
const NOTIFY_EVENTS = new Set([
	"session_start",
	"session_shutdown",
	"agent_start",
	"agent_end",
	"agent_settled",
	"turn_start",
	"turn_end",
	"message_start",
	"message_end",
	"tool_execution_start",
	"tool_execution_update",
	"tool_execution_end",
	"queue_update",
	"compaction_start",
	"compaction_end",
	"session_compact",
	"auto_retry_start",
	"auto_retry_end",
]);
const BLOCKING_EVENTS = new Set([
	"tool_call",
	"tool_result",
	"session_before_switch",
	"session_before_fork",
	"input",
	"before_agent_start",
	"context",
	"session_before_compact",
]);
// pi events with no handler call in pith's RPC modes (the TUI's, or provider internals).
// `session_before_tree` / `session_tree`: only the TUI's `/tree` and `ctx.navigateTree()` (which
// raises) navigate the tree; pi's RPC has no command for it.
const TUI_EVENTS = new Set(["ui_prompt_start", "ui_prompt_end", "message_update", "session_before_tree", "session_tree"]);
// pi's events (0.73, 0.87, 1.6) that pith does not emit to extensions: a handler for one is
// reported; a name no pi emits (an older pi's `session_switch`) is kept, never called, as by pi.
const PI_ONLY_EVENTS = new Set(
	"project_trust resources_discover session_info_changed session_compact_failed mcp_servers_change context_with_system cache_warming_decision before_provider_request before_provider_headers after_provider_response provider_stream_event agent_before_settle model_select thinking_level_select user_bash".split(" "),
);

function reportError(ext, event, error) {
	send({ type: "error", extension: ext.path, event, error: String(error) });
}

function errText(e) {
	if (e instanceof Error) return e.message;
	return String(e);
}

class Unsupported extends Error {}

function unsupported(method) {
	return new Unsupported(`pith does not support ${method} (docs/extensions.md)`);
}

function dialog(method, fields, opts) {
	if (!hello || hello.mode !== "rpc") {
		return Promise.resolve(method === "confirm" ? { confirmed: false, cancelled: true } : { cancelled: true });
	}
	const id = `d${nextDialog++}`;
	const msg = { type: "ui", method, id, ...fields };
	if (opts?.timeout) msg.timeout = opts.timeout;
	return new Promise((resolve) => {
		pendingDialogs.set(id, resolve);
		const onAbort = () => {
			if (pendingDialogs.delete(id)) resolve({ cancelled: true });
		};
		opts?.signal?.addEventListener?.("abort", onAbort, { once: true });
		send(msg);
	});
}

function makeUi() {
	const ignored = () => {};
	return {
		select: async (title, options, opts) => {
			const r = await dialog("select", { title, options }, opts);
			return r.cancelled ? undefined : r.value;
		},
		confirm: async (title, message, opts) => {
			const r = await dialog("confirm", { title, message }, opts);
			return r.cancelled ? false : r.confirmed === true;
		},
		input: async (title, placeholder, opts) => {
			const r = await dialog("input", placeholder === undefined ? { title } : { title, placeholder }, opts);
			return r.cancelled ? undefined : r.value;
		},
		editor: async (title, prefill) => {
			const r = await dialog("editor", prefill === undefined ? { title } : { title, prefill });
			return r.cancelled ? undefined : r.value;
		},
		notify(message, type) {
			const m = { type: "ui", method: "notify", message: String(message) };
			if (type !== undefined) m.notifyType = type;
			send(m);
		},
		setStatus(key, text) {
			const m = { type: "ui", method: "setStatus", statusKey: key };
			if (text !== undefined) m.statusText = text;
			send(m);
		},
		setWidget(key, content, options) {
			// As pi's RPC mode: string arrays only; component factories are ignored.
			if (content === undefined || Array.isArray(content)) {
				const m = { type: "ui", method: "setWidget", widgetKey: key };
				if (content !== undefined) m.widgetLines = content;
				if (options?.placement !== undefined) m.widgetPlacement = options.placement;
				send(m);
			}
		},
		setTitle(title) {
			send({ type: "ui", method: "setTitle", title });
		},
		setEditorText(text) {
			send({ type: "ui", method: "set_editor_text", text });
		},
		pasteToEditor(text) {
			this.setEditorText(text);
		},
		getEditorText: () => "",
		// TUI-only: accepted and ignored, as pi does in RPC mode.
		onTerminalInput: () => ignored,
		setWorkingMessage: ignored,
		setWorkingVisible: ignored,
		setWorkingIndicator: ignored,
		setHiddenThinkingLabel: ignored,
		setFooter: ignored,
		setHeader: ignored,
		custom: async () => undefined,
		addAutocompleteProvider: ignored,
		setEditorComponent: ignored,
		getEditorComponent: () => undefined,
		get theme() {
			return plainTheme;
		},
		getAllThemes: () => [],
		getTheme: () => undefined,
		setTheme: () => ({ success: false, error: "Theme switching not supported in RPC mode" }),
		getToolsExpanded: () => false,
		setToolsExpanded: ignored,
	};
}

// Text styling as a no-op (RPC hosts render plain text).
const plainTheme = new Proxy(
	{},
	{
		get: (_, k) => (k === "name" ? "plain" : (_c, s) => (s === undefined ? _c : s)),
	},
);

function makeContext(signal, systemPrompt) {
	const ctx = {
		ui: makeUi(),
		get mode() {
			return hello?.mode ?? "rpc";
		},
		get hasUI() {
			return hello?.mode === "rpc";
		},
		get cwd() {
			return hello?.cwd ?? process.cwd();
		},
		signal,
		isProjectTrusted: () => projectTrusted,
		sessionManager: makeSessionManager(),
		modelRegistry: makeModelRegistry(),
		get model() {
			return state.model ?? undefined;
		},
		get thinkingLevel() {
			return state.thinkingLevel;
		},
		isIdle: () => state.idle === true,
		hasPendingMessages: () => state.pendingMessages === true,
		abort: () => {
			apiCall("abort", {}).catch(() => {});
		},
		getContextUsage: () => snap("ctx.getContextUsage()").contextUsage ?? undefined,
		// In a before_agent_start handler: the prompt as the handlers before it left it.
		getSystemPrompt: () => systemPrompt?.() ?? snap("ctx.getSystemPrompt()").systemPrompt,
		compact: (options) => {
			const params = options?.customInstructions === undefined ? {} : { customInstructions: options.customInstructions };
			apiCall("compact", params).then(
				(r) => options?.onComplete?.(r),
				(e) => options?.onError?.(e instanceof Error ? e : new Error(String(e))),
			);
		},
	};
	Object.defineProperty(ctx, "scopedModels", {
		get() {
			throw unsupported("ctx.scopedModels");
		},
	});
	// pi's `ctx.newSession()`: a new session as `new_session` makes it (the extensions'
	// `session_before_switch` first); `{cancelled}`. A `setup` callback needs pi's writable
	// SessionManager, which pith does not hand out.
	ctx.newSession = (options) => {
		if (options?.setup !== undefined) return Promise.reject(unsupported("ctx.newSession({setup})"));
		if (options?.withSession !== undefined) return Promise.reject(unsupported("ctx.newSession({withSession})"));
		const params = {};
		if (typeof options?.parentSession === "string") params.parentSession = options.parentSession;
		return apiCall("newSession", params).then((r) => ({ cancelled: r?.cancelled === true }));
	};
	// pi's `ctx.fork(entryId)` and `ctx.switchSession(path)`: as the `fork` and `switch_session`
	// commands (the extensions' `session_before_fork` / `session_before_switch` first); `{cancelled}`.
	// A `withSession` callback needs pi's replaced-session context; `position: "at"` forks after
	// the entry, which pith's `fork` does not do: both raise an error naming them.
	ctx.fork = (entryId, options) => {
		if (options?.withSession !== undefined) return Promise.reject(unsupported("ctx.fork({withSession})"));
		if (options?.position !== undefined && options.position !== "before") {
			return Promise.reject(unsupported(`ctx.fork({position: ${JSON.stringify(options.position)}})`));
		}
		return apiCall("fork", { entryId: String(entryId) }).then((r) => ({ cancelled: r?.cancelled === true }));
	};
	ctx.switchSession = (sessionPath, options) => {
		if (options?.withSession !== undefined) return Promise.reject(unsupported("ctx.switchSession({withSession})"));
		return apiCall("switchSession", { sessionPath: String(sessionPath) }).then((r) => ({
			cancelled: r?.cancelled === true,
		}));
	};
	// pi's RPC mode: at once when idle, else once the run or command in progress is over.
	ctx.shutdown = () => {
		apiCall("shutdown", {}).catch(() => {});
	};
	ctx.waitForIdle = () => apiCall("waitForIdle", {}).then(() => undefined);
	for (const k of [
		"navigateTree",
		"reload",
		"executeTool",
		"getSystemPromptOptions",
	]) {
		ctx[k] = () => {
			throw unsupported(`ctx.${k}()`);
		};
	}
	return ctx;
}

// pi's model registry, read-only: what pith's registry holds (built-in models, models.json,
// extensions' providers). Calls that need pi's model runtime raise an error naming them.
function makeModelRegistry() {
	const m = (method) => {
		if (!models) throw new Error(`pith has no model data for ctx.modelRegistry.${method}() here (docs/extensions.md)`);
		return models;
	};
	const known = {
		getAll: () => m("getAll").all.slice(),
		getAvailable: () => m("getAvailable").all.filter((x) => m("getAvailable").configured.includes(x.provider)),
		getAvailableSnapshot: () => known.getAvailable(),
		find: (provider, id) => m("find").all.find((x) => x.provider === provider && x.id === id),
		getModel: (provider, id) => known.find(provider, id),
		getModels: (provider) => m("getModels").all.filter((x) => provider === undefined || x.provider === provider),
		getAllModels: (provider) => known.getModels(provider),
		hasConfiguredAuth: (model) => m("hasConfiguredAuth").configured.includes(typeof model === "string" ? model : model?.provider),
		isUsingOAuth: () => false,
		getError: () => m("getError").error ?? undefined,
	};
	return new Proxy(known, {
		get(target, k) {
			if (typeof k === "symbol" || k === "then") return undefined;
			if (k in target) return target[k];
			return () => {
				throw unsupported(`ctx.modelRegistry.${String(k)}()`);
			};
		},
	});
}

// The reads of pi's session manager that pith answers; the others raise an error naming them.
function makeSessionManager() {
	const known = {
		getSessionId: () => state.sessionId,
		getSessionFile: () => state.sessionFile ?? undefined,
		getSessionName: () => state.sessionName ?? undefined,
		getCwd: () => hello?.cwd ?? process.cwd(),
		getEntries: () => snap("ctx.sessionManager.getEntries()").entries.slice(),
		getLeafId: () => snap("ctx.sessionManager.getLeafId()").leafId ?? null,
		getLeafEntry: () => {
			const leaf = snap("ctx.sessionManager.getLeafEntry()").leafId;
			return leaf ? entriesById().get(leaf) : undefined;
		},
		getEntry: (id) => entriesById().get(id),
		getLabel: (id) => labels().get(id)?.label,
		getBranch: (fromId) => {
			const byId = entriesById();
			const out = [];
			const start = fromId ?? snapshot.leafId;
			let cur = start ? byId.get(start) : undefined;
			while (cur) {
				out.push(cur);
				cur = cur.parentId ? byId.get(cur.parentId) : undefined;
			}
			return out.reverse();
		},
		getHeader: () => snap("ctx.sessionManager.getHeader()").header ?? null,
		getTree: () => sessionTree(),
	};
	return new Proxy(known, {
		get(target, k) {
			if (typeof k === "symbol" || k === "then") return undefined;
			if (k in target) return target[k];
			return () => {
				throw unsupported(`ctx.sessionManager.${String(k)}()`);
			};
		},
	});
}

function execCommand(command, args, options = {}) {
	return new Promise((resolve) => {
		const child = spawn(command, args ?? [], {
			cwd: options.cwd ?? hello?.cwd ?? process.cwd(),
			stdio: ["ignore", "pipe", "pipe"],
		});
		let stdout = "";
		let stderr = "";
		let killed = false;
		const kill = () => {
			killed = true;
			child.kill("SIGTERM");
		};
		const timer = options.timeout ? setTimeout(kill, options.timeout) : undefined;
		options.signal?.addEventListener?.("abort", kill, { once: true });
		child.stdout.on("data", (d) => (stdout += d));
		child.stderr.on("data", (d) => (stderr += d));
		child.on("error", (e) => {
			if (timer) clearTimeout(timer);
			resolve({ stdout, stderr: stderr + errText(e), code: 1, killed });
		});
		child.on("close", (code) => {
			if (timer) clearTimeout(timer);
			resolve({ stdout, stderr, code: code ?? 1, killed });
		});
	});
}

const TUI_REGISTRATIONS = [
	"registerShortcut",
	"registerMessageRenderer",
	"registerEntryRenderer",
	"registerToolRenderer",
	"registerMarkdownTransformer",
];

function makeApi(ext) {
	const api = {
		on(event, handler) {
			if (!NOTIFY_EVENTS.has(event) && !BLOCKING_EVENTS.has(event) && !TUI_EVENTS.has(event)) {
				if (PI_ONLY_EVENTS.has(event)) reportError(ext, "load", unsupported(`pi.on("${event}")`).message);
				return () => {};
			}
			if (!ext.handlers.has(event)) ext.handlers.set(event, []);
			const first = ext.handlers.get(event).length === 0;
			ext.handlers.get(event).push(handler);
			// A subscription made later (in a handler) reaches pith too.
			if (ready && first && !TUI_EVENTS.has(event)) sendRegister();
			return () => {
				const l = ext.handlers.get(event) ?? [];
				const i = l.indexOf(handler);
				if (i >= 0) l.splice(i, 1);
			};
		},
		registerTool(def) {
			ext.tools.push(def);
			if (ready) sendRegister();
		},
		registerCommand(name, options) {
			ext.commands.push({ name, ...options });
			if (ready) sendRegister();
		},
		registerFlag(name, options) {
			const type = options?.type;
			if (options?.default !== undefined && typeof options.default !== type) {
				throw new Error(`Invalid default for flag "${name}": expected ${type}, got ${typeof options.default}`);
			}
			ext.flags.set(name, { type });
			if (options?.default !== undefined && !flagValues.has(name)) flagValues.set(name, options.default);
		},
		getFlag(name) {
			// The command line's value once every extension has loaded; the default before.
			if (!ext.flags.has(name)) return undefined;
			return flagValues.get(name);
		},
		sendMessage(message, options) {
			const m = { type: "send_message", message: { customType: message.customType, content: message.content } };
			if (message.display !== undefined) m.message.display = message.display;
			if (message.details !== undefined) m.message.details = message.details;
			if (options?.triggerTurn !== undefined) m.triggerTurn = options.triggerTurn;
			if (options?.deliverAs !== undefined) m.deliverAs = options.deliverAs;
			send(m);
		},
		sendUserMessage(content, options) {
			const m = { type: "send_user_message", content };
			if (options?.deliverAs !== undefined) m.deliverAs = options.deliverAs;
			send(m);
		},
		exec: execCommand,
		events: bus,
		appendEntry(customType, data) {
			apiCallReported(ext, "appendEntry", data === undefined ? { customType } : { customType, data });
		},
		setSessionName(name) {
			apiCallReported(ext, "setSessionName", { name });
		},
		getSessionName: () => state.sessionName ?? undefined,
		setLabel(entryId, label) {
			apiCallReported(ext, "setLabel", label === undefined ? { entryId } : { entryId, label });
		},
		getActiveTools: () => (state.tools ?? []).map((t) => t.name),
		getAllTools: () =>
			[...(state.tools ?? []), ...(state.inactiveTools ?? [])].map((t) => ({ name: t.name, description: t.description })),
		setActiveTools(names) {
			const list = [...(names ?? [])].map(String);
			// Read back at once, as pi's is synchronous; pith's next state line confirms it.
			const all = [...(state.tools ?? []), ...(state.inactiveTools ?? [])];
			state = {
				...state,
				tools: all.filter((t) => list.includes(t.name)),
				inactiveTools: all.filter((t) => !list.includes(t.name)),
			};
			apiCallReported(ext, "setActiveTools", { names: list });
		},
		getCommands: () => snap("pi.getCommands()").commands ?? [],
		async setModel(model) {
			return apiCall("setModel", { provider: model?.provider, id: model?.id });
		},
		getThinkingLevel: () => state.thinkingLevel,
		setThinkingLevel(level) {
			apiCallReported(ext, "setThinkingLevel", { level });
		},
	};
	for (const k of TUI_REGISTRATIONS) api[k] = () => {};
	api.getSettings = () => structuredClone(settings);
	// The data form (baseUrl, apiKey, api, headers, authHeader, models); in the factory the call
	// reaches pith before this host's `register`, so start-up's `--model` sees the provider.
	// What needs pi's model runtime raises an error naming it: in a handler, there; in the
	// factory, reported (the rest of the extension loads).
	const refuse = (what) => {
		const e = unsupported(what);
		if (ready) throw e;
		reportError(ext, "registerProvider", e.message);
	};
	api.registerProvider = (name, config) => {
		if (name !== null && typeof name === "object") {
			return refuse("pi.registerProvider(provider) with a pi-ai Provider object");
		}
		for (const k of ["streamSimple", "oauth", "refreshModels"]) {
			if (config?.[k] !== undefined) return refuse(`pi.registerProvider("${name}", {${k}})`);
		}
		const data = JSON.parse(JSON.stringify(config ?? {}));
		const call = apiCall("registerProvider", { name: String(name), config: data });
		if (ready) {
			call.catch((e) => reportError(ext, "registerProvider", errText(e)));
		} else {
			// In a factory: pith refusing the definition is one of pi's start-up errors.
			loadCalls.push(call.catch((e) => providerErrors.push(`Extension "${ext.path}" error: ${errText(e)}`)));
		}
	};
	api.unregisterProvider = (name) => {
		apiCallReported(ext, "unregisterProvider", { name: String(name) });
	};
	return api;
}

let ready = false;
// Provider registrations of the factories (awaited before start-up is judged) and their errors.
const loadCalls = [];
const providerErrors = [];

function liveExtensions() {
	return extensions.filter((e) => !e.dead);
}

function toolSpec(def) {
	const t = { name: def.name, description: def.description ?? "" };
	if (def.parameters && typeof def.parameters === "object") t.parameters = JSON.parse(JSON.stringify(def.parameters));
	if (def.promptSnippet !== undefined) t.promptSnippet = def.promptSnippet;
	if (Array.isArray(def.promptGuidelines)) t.promptGuidelines = def.promptGuidelines.filter((g) => typeof g === "string");
	return t;
}

function sendRegister() {
	tools.clear();
	commands.clear();
	const events = new Set();
	for (const ext of liveExtensions()) {
		for (const def of ext.tools) if (!tools.has(def.name)) tools.set(def.name, { ext, def });
		for (const def of ext.commands) if (!commands.has(def.name)) commands.set(def.name, { ext, def });
		for (const [ev, hs] of ext.handlers) if (hs.length && !TUI_EVENTS.has(ev)) events.add(ev);
	}
	send({
		type: "register",
		protocol: 1,
		name: extensionPaths.length === 1 ? path.basename(extensionPaths[0]).replace(/\.[^.]*$/, "") : "node-host",
		tools: [...tools.values()].map(({ def }) => toolSpec(def)),
		commands: [...commands.values()].map(({ ext, def }) => {
			const c = { name: def.name, path: ext.path };
			if (def.description !== undefined) c.description = def.description;
			return c;
		}),
		events: [...events],
	});
}

// A handler's promise, bounded by the host's timeout: an extension that hangs is reported and
// dropped here, so the other extensions of this host stay.
function bounded(ext, event, promise) {
	if (!handlerTimeoutMs) return promise;
	let timer;
	const timeout = new Promise((_, reject) => {
		timer = setTimeout(() => {
			const e = new Error(`did not answer ${event} within ${Math.round(handlerTimeoutMs / 1000)} seconds`);
			e.hung = true;
			reject(e);
		}, handlerTimeoutMs);
	});
	return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function drop(ext) {
	if (ext.dead) return;
	ext.dead = true;
	if (ready) sendRegister();
}

async function runHandler(ext, event, handler, payload, ctx) {
	try {
		return { ok: true, value: await bounded(ext, event, Promise.resolve().then(() => handler(payload, ctx))) };
	} catch (e) {
		if (e?.hung) drop(ext);
		return { ok: false, error: errText(e) };
	}
}

function handlersFor(event) {
	const out = [];
	for (const ext of liveExtensions()) for (const h of ext.handlers.get(event) ?? []) out.push([ext, h]);
	return out;
}

async function onEvent(id, event) {
	const ty = event?.type;
	const ac = new AbortController();
	if (id !== undefined) pendingCalls.set(id, ac);
	let currentPrompt;
	const ctx = makeContext(ac.signal, ty === "before_agent_start" ? () => currentPrompt : undefined);
	try {
		if ((needsSnapshot || needsModels) && handlersFor(ty).length) await refreshReads();
		if (id === undefined) {
			for (const [ext, h] of handlersFor(ty)) {
				const r = await runHandler(ext, ty, h, event, ctx);
				if (!r.ok) reportError(ext, ty, r.error);
			}
			return;
		}
		let result = {};
		if (ty === "tool_call") {
			const before = JSON.stringify(event.input);
			for (const [ext, h] of handlersFor(ty)) {
				const r = await runHandler(ext, ty, h, event, ctx);
				if (!r.ok) {
					// As pi: a failing tool_call handler blocks the call.
					send({ type: "result", id, error: r.error, extension: ext.path });
					return;
				}
				if (r.value?.block) {
					result = { block: true };
					if (r.value.reason !== undefined) result.reason = r.value.reason;
					break;
				}
			}
			if (!result.block && JSON.stringify(event.input) !== before) result = { input: event.input };
		} else if (ty === "tool_result") {
			const cur = { ...event };
			for (const [ext, h] of handlersFor(ty)) {
				const r = await runHandler(ext, ty, h, cur, ctx);
				if (!r.ok) {
					reportError(ext, ty, r.error);
					continue;
				}
				for (const k of ["content", "details", "isError"]) {
					if (r.value && r.value[k] !== undefined) {
						cur[k] = r.value[k];
						result[k] = r.value[k];
					}
				}
			}
		} else if (ty === "session_before_switch" || ty === "session_before_fork") {
			for (const [ext, h] of handlersFor(ty)) {
				const r = await runHandler(ext, ty, h, event, ctx);
				if (!r.ok) {
					reportError(ext, ty, r.error);
					continue;
				}
				if (r.value?.cancel) {
					result = { cancel: true };
					break;
				}
			}
		} else if (ty === "session_before_compact") {
			// As pi: the first `cancel` wins; otherwise the last answer counts (a `compaction`
			// is the summary pith writes instead of asking the model).
			const ev = { ...event, signal: ac.signal };
			for (const [ext, h] of handlersFor(ty)) {
				const r = await runHandler(ext, ty, h, ev, ctx);
				if (!r.ok) {
					reportError(ext, ty, r.error);
					continue;
				}
				if (r.value?.cancel) {
					result = { cancel: true };
					break;
				}
				if (r.value) result = r.value.compaction ? { compaction: r.value.compaction } : {};
			}
		} else if (ty === "before_agent_start") {
			// As pi: each handler may add a message and replace the system prompt; the next one
			// sees the replacement.
			currentPrompt = event.systemPrompt;
			const messages = [];
			let replaced = false;
			for (const [ext, h] of handlersFor(ty)) {
				const ev = { ...event, systemPrompt: currentPrompt };
				// pi 1.6.0's structured prompt options (sections): pith builds its prompt itself.
				Object.defineProperty(ev, "systemPromptOptions", {
					get() {
						throw unsupported("before_agent_start's event.systemPromptOptions");
					},
				});
				const r = await runHandler(ext, ty, h, ev, ctx);
				if (!r.ok) {
					reportError(ext, ty, r.error);
					continue;
				}
				if (r.value?.message) messages.push(r.value.message);
				if (r.value?.systemPrompt !== undefined) {
					currentPrompt = String(r.value.systemPrompt);
					replaced = true;
				}
			}
			if (messages.length) result.messages = messages;
			if (replaced) result.systemPrompt = currentPrompt;
		} else if (ty === "context") {
			// As pi: a handler returns `{messages}` or edits `event.messages` in place; the next
			// one sees the result. Only this request is changed.
			let current = event.messages ?? [];
			let changed = false;
			for (const [ext, h] of handlersFor(ty)) {
				const visible = current.slice();
				const snapshotOf = visible.slice();
				const r = await runHandler(ext, ty, h, { type: "context", messages: visible }, ctx);
				if (!r.ok) {
					reportError(ext, ty, r.error);
					continue;
				}
				const same = visible.length === snapshotOf.length && visible.every((m, i) => m === snapshotOf[i]);
				const returned = r.value?.messages ?? (same ? undefined : visible);
				if (!returned) continue;
				current = returned;
				changed = true;
			}
			if (changed) result = { messages: current };
		} else if (ty === "input") {
			const cur = { ...event };
			let changed = false;
			for (const [ext, h] of handlersFor(ty)) {
				const r = await runHandler(ext, ty, h, cur, ctx);
				if (!r.ok) {
					reportError(ext, ty, r.error);
					continue;
				}
				const v = r.value;
				if (v?.action === "handled") {
					result = { action: "handled" };
					changed = false;
					break;
				}
				if (v?.action === "transform") {
					cur.text = v.text ?? cur.text;
					if (v.images !== undefined) cur.images = v.images;
					changed = true;
				}
			}
			if (changed) {
				result = { action: "transform", text: cur.text };
				if (cur.images !== undefined) result.images = cur.images;
			} else if (result.action !== "handled") {
				result = { action: "continue" };
			}
		}
		send({ type: "result", id, result });
	} finally {
		if (id !== undefined) pendingCalls.delete(id);
	}
}

async function onExecuteTool(msg) {
	const ac = new AbortController();
	pendingCalls.set(msg.id, ac);
	const entry = tools.get(msg.toolName);
	try {
		if (!entry) {
			send({ type: "result", id: msg.id, error: `Tool ${msg.toolName} not found` });
			return;
		}
		const onUpdate = (partial) => {
			if (ac.signal.aborted) return;
			const u = { type: "tool_update", id: msg.id, content: partial?.content ?? [] };
			if (partial?.details !== undefined) u.details = partial.details;
			send(u);
		};
		const ctx = makeContext(ac.signal);
		await refreshReads();
		const r = await Promise.resolve().then(() =>
			entry.def.execute(msg.toolCallId, msg.input, ac.signal, onUpdate, ctx),
		);
		if (ac.signal.aborted) return;
		const res = { content: r?.content ?? [] };
		if (r?.details !== undefined) res.details = r.details;
		if (r?.isError) res.isError = true;
		send({ type: "result", id: msg.id, result: res });
	} catch (e) {
		if (!ac.signal.aborted) send({ type: "result", id: msg.id, error: errText(e) });
	} finally {
		pendingCalls.delete(msg.id);
	}
}

async function onCommand(msg) {
	const ac = new AbortController();
	pendingCalls.set(msg.id, ac);
	const entry = commands.get(msg.name);
	try {
		if (!entry) throw new Error(`Command /${msg.name} not found`);
		await refreshReads();
		await bounded(entry.ext, "command", Promise.resolve().then(() => entry.def.handler(msg.args ?? "", makeContext(ac.signal))));
		send({ type: "result", id: msg.id, result: {} });
	} catch (e) {
		if (e?.hung && entry) drop(entry.ext);
		send({ type: "result", id: msg.id, error: errText(e), ...(entry ? { extension: entry.ext.path } : {}) });
	} finally {
		pendingCalls.delete(msg.id);
	}
}

// pi stops at start-up when an extension fails to load, a provider a factory registered is
// refused, or a command-line flag is not one the extensions registered (or lacks its value):
// these are its diagnostics, and pith stops with them.
async function loadAll() {
	const loadErrors = [];
	for (const p of extensionPaths) {
		const ext = { path: p, handlers: new Map(), tools: [], commands: [], flags: new Map(), dead: false };
		extensions.push(ext);
		let factory;
		try {
			const mod = await import(pathToFileURL(p).href);
			factory = mod.default;
			if (factory && typeof factory === "object" && typeof factory.default === "function") factory = factory.default;
		} catch (e) {
			ext.dead = true;
			loadErrors.push(`Failed to load extension "${p}": Failed to load extension: ${errText(e)}`);
			continue;
		}
		if (typeof factory !== "function") {
			ext.dead = true;
			loadErrors.push(`Failed to load extension "${p}": Extension does not export a valid factory function: ${p}`);
			continue;
		}
		try {
			if (needsSnapshot && !snapshot) await refreshSnapshot();
			await bounded(ext, "startup", Promise.resolve().then(() => factory(makeApi(ext))));
		} catch (e) {
			ext.dead = true;
			loadErrors.push(`Failed to load extension "${p}": Failed to load extension: ${errText(e)}`);
		}
	}
	await Promise.all(loadCalls);
	// pi's order: providers the factories registered, the command line's flags, failed loads.
	const errors = [...providerErrors, ...applyCliFlags(), ...loadErrors];
	if (errors.length) {
		send({ type: "startup_failed", errors });
		return;
	}
	ready = true;
	sendRegister();
}

// The command line's flags over the registered ones' defaults (pi's applyExtensionFlagValues).
function applyCliFlags() {
	const registered = new Map();
	for (const ext of liveExtensions()) for (const [name, flag] of ext.flags) registered.set(name, flag);
	const errors = [];
	const unknown = [];
	for (const [name, value] of cliFlags) {
		const flag = registered.get(name);
		if (!flag) unknown.push(name);
		else if (flag.type === "boolean") flagValues.set(name, true);
		else if (typeof value === "string") flagValues.set(name, value);
		else errors.push(`Extension flag "--${name}" requires a value`);
	}
	if (unknown.length) {
		errors.push(`Unknown option${unknown.length === 1 ? "" : "s"}: ${unknown.map((n) => `--${n}`).join(", ")}`);
	}
	return errors;
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
	if (!line.trim()) return;
	let msg;
	try {
		msg = JSON.parse(line);
	} catch {
		return;
	}
	switch (msg.type) {
		case "settings":
			settings = msg.settings ?? {};
			break;
		case "hello":
			hello = msg;
			loadAll();
			break;
		case "event":
			onEvent(msg.id, msg.event);
			break;
		case "execute_tool":
			onExecuteTool(msg);
			break;
		case "command":
			onCommand(msg);
			break;
		case "cancel":
			pendingCalls.get(msg.id)?.abort();
			break;
		case "state":
			state = msg.state ?? {};
			break;
		case "call_result": {
			const p = pendingApiCalls.get(msg.id);
			if (p) {
				pendingApiCalls.delete(msg.id);
				if (msg.error !== undefined) p.reject(new Error(msg.error));
				else p.resolve(msg.result);
			}
			break;
		}
		case "ui_response": {
			const resolve = pendingDialogs.get(msg.id);
			if (resolve) {
				pendingDialogs.delete(msg.id);
				resolve(msg);
			}
			break;
		}
	}
});
rl.on("close", () => process.exit(0));
process.on("unhandledRejection", (e) => log(`pith node host: unhandled rejection: ${errText(e)}`));
