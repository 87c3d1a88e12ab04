// pith's codemode prelude: evaluated in the worker's QuickJS context before the script.
// It evaluates to a function (host, setupJson) -> { settle, run, stalled }. `host(kind, json)` is
// the only way out of the VM: "call" (a tool call), "global" (searchTools & co., answered by the
// worker itself), "output" (text, console, image) and "done". The host function stays in this
// closure, out of the script's reach. Frames of this file are dropped from error stacks.
(function (host, setupJson) {
	"use strict";
	const setup = JSON.parse(setupJson);
	const stringify = JSON.stringify;
	const parse = JSON.parse;
	const thenOf = Promise.prototype.then;
	const ErrorCtor = Error;
	const TypeErrorCtor = TypeError;
	const RangeErrorCtor = RangeError;
	const waiting = new Map();
	let lastId = 0;
	let over = false;
	const EXIT = Object.freeze({});
	const MAX_VALUE = 262144;
	const MAX_TOTAL = 1048576;
	const MAX_OUT_CHARS = 16777216;
	const MAX_OUT_ITEMS = 100000;

	function finish(ok, fields) {
		if (over) return;
		over = true;
		fields.ok = ok;
		host("done", stringify(fields));
	}

	// QuickJS stacks hold frames only: the first line is "Name: message", as node prints it.
	function stackText(error) {
		const first = error.message ? error.name + ": " + error.message : String(error.name);
		const lines = typeof error.stack === "string"
			? error.stack.split("\n").filter((l) => l.trim() !== "" && l.indexOf("codemode-prelude.js") < 0)
			: [];
		return [first].concat(lines).join("\n");
	}

	function show(value) {
		if (typeof value === "string") return value;
		if (value instanceof ErrorCtor) return stackText(value);
		if (typeof value === "number") return String(value);
		try {
			const j = stringify(value);
			return j === undefined ? String(value) : j;
		} catch (e) {
			return String(value);
		}
	}

	function errorFields(error) {
		try {
			if (error instanceof ErrorCtor) {
				return { error: { name: String(error.name), message: String(error.message), stack: stackText(error) } };
			}
			return { error: { message: String(show(error)) } };
		} catch (e) {
			return { error: { message: "The script threw a value that cannot be described" } };
		}
	}

	function requester(kind, name, spread) {
		return (...args) => new Promise((resolve, reject) => {
			let json;
			try {
				const v = spread ? args : args[0];
				json = v === undefined ? undefined : stringify(v);
			} catch (e) {
				reject(e);
				return;
			}
			const id = ++lastId;
			waiting.set(id, { resolve, reject });
			host(kind, stringify({ id, name, args: json === undefined ? undefined : parse(json) }));
		});
	}

	const tools = Object.create(null);
	const listing = [];
	for (const t of setup.tools) {
		const f = requester("call", t.name, false);
		if (!(t.jsName in tools)) {
			tools[t.jsName] = f;
			listing.push(Object.freeze({ name: t.jsName, description: t.description }));
		}
		if (!(t.name in tools)) tools[t.name] = f;
	}
	Object.freeze(tools);
	Object.freeze(listing);

	const squash = (s) => s.toLowerCase().replace(/[^a-z0-9]/g, "");
	function guarded(target, label, names, hint) {
		return new Proxy(target, {
			get(obj, key, receiver) {
				if (typeof key !== "string" || key in obj || key in Object.prototype || key === "then" || key === "toJSON") {
					return Reflect.get(obj, key, receiver);
				}
				const want = squash(key);
				const same = names.filter((n) => squash(n) === want);
				const near = same.length > 0 ? same : names.filter((n) => want && (squash(n).includes(want) || want.includes(squash(n))));
				let text = label + "." + key + " does not exist.";
				if (near.length > 0) text += " Did you mean " + near.slice(0, 5).map((n) => label + "." + n).join(", ") + "?";
				else if (names.length <= 20) text += " Available: " + names.join(", ") + ".";
				if (hint) text += " " + hint;
				text += ' Check for a member with "' + key + '" in ' + label + ".";
				throw new TypeErrorCtor(text);
			},
		});
	}
	const toolsView = guarded(tools, "tools", listing.map((t) => t.name),
		"ALL_TOOLS lists every tool; searchTools(query) finds tools by topic.");

	for (const name of ["searchTools", "describeTool", "describeNamespace"]) {
		Object.defineProperty(globalThis, name, { value: requester("global", name, true), enumerable: true });
	}
	const modelMembers = Object.create(null);
	for (const m of ["getModelsOfType", "getAvailableOfType", "getModelOfType", "classify", "generateImages"]) {
		modelMembers[m] = requester("global", "models." + m, true);
	}
	Object.freeze(modelMembers);
	Object.defineProperty(globalThis, "models", { value: guarded(modelMembers, "models", Object.keys(modelMembers)), enumerable: true });

	const kept = new Map(Object.entries(setup.store));
	const written = new Map();
	let keptChars = 0;
	for (const [k, j] of kept) keptChars += k.length + j.length;
	const STORE_HINT = "store() is for small state such as IDs or summaries. Show images with image(), keep large data in variables, or write it to a file with a tool.";

	function store(key, value) {
		if (typeof key !== "string") throw new TypeError("store() key must be a string");
		const before = kept.has(key) ? key.length + kept.get(key).length : 0;
		if (value === undefined) {
			kept.delete(key);
			keptChars -= before;
			written.set(key, undefined);
			return;
		}
		let json;
		try {
			json = stringify(value);
		} catch (e) {
			throw new TypeError("store(" + stringify(key) + ") value is not JSON-serializable: " + show(e));
		}
		if (json === undefined) throw new TypeError("store(" + stringify(key) + ") value is not JSON-serializable");
		if (json.length > MAX_VALUE) {
			throw new RangeError("store(" + stringify(key) + ") value has " + json.length +
				" characters of JSON, more than the limit of " + MAX_VALUE + ". " + STORE_HINT);
		}
		const after = keptChars - before + key.length + json.length;
		if (after > MAX_TOTAL) {
			throw new RangeError("store is full: stored values would exceed " + MAX_TOTAL +
				" characters of JSON. Delete keys with store(key, undefined). " + STORE_HINT);
		}
		kept.set(key, json);
		keptChars = after;
		written.set(key, json);
	}
	function load(key) {
		if (typeof key !== "string") throw new TypeError("load() key must be a string");
		const j = kept.get(key);
		return j === undefined ? undefined : parse(j);
	}
	function writes() {
		const set = {};
		const del = [];
		for (const [k, j] of written) {
			if (j === undefined) del.push(k);
			else set[k] = parse(j);
		}
		return { set, delete: del };
	}
	Object.defineProperty(globalThis, "store", { value: store, enumerable: true });
	Object.defineProperty(globalThis, "load", { value: load, enumerable: true });

	let outChars = 0;
	let outItems = 0;
	function emit(kind, data, mimeType) {
		if (over) return;
		outChars += data.length;
		outItems++;
		if (outChars > MAX_OUT_CHARS || outItems > MAX_OUT_ITEMS) {
			const e = new RangeErrorCtor("script output exceeded the limit of " + MAX_OUT_CHARS +
				" characters or " + MAX_OUT_ITEMS + " text(), image(), and console calls. " +
				"Print a summary instead, or write large data to a file with a tool.");
			finish(false, errorFields(e));
			throw e;
		}
		host("output", stringify({ kind, data, mimeType }));
	}
	function asText(value) {
		if (value === undefined || value === null || (typeof value !== "object" && typeof value !== "function")) return String(value);
		const j = stringify(value);
		return j === undefined ? String(value) : j;
	}
	function text(value) {
		let s;
		try {
			s = asText(value);
		} catch (e) {
			throw new TypeErrorCtor(e instanceof ErrorCtor ? e.message : String(e));
		}
		emit("text", s);
	}
	const IMAGE_EXPECTS = 'image expects a non-empty image URL string, an object with image_url, or an image block { type: "image", data, mimeType }';
	function imageUrl(v) {
		if (typeof v === "string") return v;
		if (typeof v !== "object" || v === null || Array.isArray(v)) throw new TypeErrorCtor(IMAGE_EXPECTS);
		if (v.image_url !== undefined) {
			if (typeof v.image_url !== "string") throw new TypeErrorCtor(IMAGE_EXPECTS);
			return v.image_url;
		}
		if (typeof v.type !== "string") throw new TypeErrorCtor(IMAGE_EXPECTS);
		if (v.type !== "image") throw new TypeErrorCtor('image only accepts image blocks, got "' + v.type + '"');
		if (typeof v.data !== "string" || v.data === "") throw new TypeErrorCtor("image expected image block data");
		if (v.data.toLowerCase().startsWith("data:")) return v.data;
		return "data:;base64," + v.data;
	}
	const SIGNATURES = [
		["image/png", /^iVBORw0KGg/],
		["image/jpeg", /^[/]9j[/](?!9)/],
		["image/gif", /^R0lGOD[dl]h/],
		["image/webp", /^UklG.{8}RUJQ/],
	];
	function image(value) {
		const url = imageUrl(value);
		if (url === "") throw new TypeErrorCtor(IMAGE_EXPECTS);
		const colon = url.indexOf(":");
		const scheme = colon < 0 ? "" : url.slice(0, colon).toLowerCase();
		if (scheme === "http" || scheme === "https") {
			throw new TypeErrorCtor("remote image URLs are not supported in tool outputs. Pass a base64 data URI instead");
		}
		const comma = url.indexOf(",");
		const params = comma < 0 ? [] : url.slice(colon + 1, comma).split(";");
		if (scheme !== "data" || comma < 0 || params.slice(1).every((p) => p.toLowerCase() !== "base64")) {
			throw new TypeErrorCtor("invalid image output. Pass a base64 data URI instead");
		}
		const data = url.slice(comma + 1).replace(/\s+/g, "");
		if (data.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(data)) {
			throw new TypeErrorCtor("invalid image output. The image data is not valid base64 (truncated or corrupted?)");
		}
		const sig = SIGNATURES.find((s) => s[1].test(data.slice(0, 16)));
		if (!sig) throw new TypeErrorCtor("invalid image output. The image data is not a PNG, JPEG, GIF, or WebP image");
		emit("image", data, sig[0]);
	}
	function exit() {
		finish(true, { writes: writes() });
		throw EXIT;
	}
	const console = {};
	for (const level of ["log", "info", "warn", "error", "debug"]) {
		console[level] = (...args) => emit("console", args.map(show).join(" "));
	}
	Object.freeze(console);
	Object.defineProperty(globalThis, "tools", { value: toolsView, enumerable: true });
	Object.defineProperty(globalThis, "ALL_TOOLS", { value: listing, enumerable: true });
	Object.defineProperty(globalThis, "console", { value: console, enumerable: true });
	Object.defineProperty(globalThis, "text", { value: text, enumerable: true });
	Object.defineProperty(globalThis, "image", { value: image, enumerable: true });
	Object.defineProperty(globalThis, "exit", { value: exit, enumerable: true });

	return {
		settle(id, ok, payload) {
			const w = waiting.get(id);
			if (!w) return;
			waiting.delete(id);
			if (!ok) {
				w.reject(new ErrorCtor(payload));
				return;
			}
			let v;
			try {
				v = payload === "" ? undefined : parse(payload);
			} catch (e) {
				w.reject(e);
				return;
			}
			w.resolve(v);
		},
		run(fn) {
			let p;
			try {
				p = fn(toolsView, console);
			} catch (e) {
				finish(false, errorFields(e));
				return;
			}
			thenOf.call(p, (value) => {
				let r;
				try {
					const j = value === undefined ? undefined : stringify(value);
					r = { value: j === undefined ? undefined : typeof value === "string" ? value : j, writes: writes() };
				} catch (e) {
					finish(false, errorFields(e));
					return;
				}
				finish(true, r);
			}, (e) => {
				if (e === EXIT) return;
				finish(false, errorFields(e));
			});
		},
		stalled() {
			if (over || waiting.size > 0) return false;
			finish(false, { error: { name: "Error", message: "The script is waiting on a promise that can never settle: no tool call is pending, and timers do not exist here." } });
			return true;
		},
	};
})
