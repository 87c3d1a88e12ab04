// A fake Anthropic Messages API on 127.0.0.1 for the interop tests. It answers by *rules* on the
// request, not by a fixed turn order, so the same script gives the same conversation whatever
// order an agent sends its requests in (pi and pith both drive it):
//
// - a summarization request (pi's summarization system prompt) -> "## Goal\nFake summary."
// - the last message carries tool results -> "done: <first line of the first result>"
// - the last user text contains directives:
//     [[bash:<command>]]  one bash tool call per directive (ids toolu_<n> in order)
//     [[tool:<name>:<json>]]  a call of any tool with that JSON input (with the bash calls, in order)
//     [[slow:<ms>]]       wait <ms> between chunks (abort / steer / queue tests)
//     [[fail:<status>]]   answer with that HTTP error (retry tests)
//     [[fail-once:<status>]]  that error the first time this text is seen, then the rule below
//     [[overflow-once]]   a context overflow error ("prompt is too long") the first time
// - otherwise "echo: <text>" in two chunks.
//
// Every request is kept in `requests` (the parsed body) for the tests to look at.

import http from "node:http";

const SUMMARY_MARKER = "You are a context summarization assistant";

function textOf(content) {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.filter((b) => b && b.type === "text")
		.map((b) => b.text)
		.join("");
}

function systemText(body) {
	if (typeof body.system === "string") return body.system;
	if (Array.isArray(body.system)) return body.system.map((b) => b.text ?? "").join("");
	return "";
}

const failedOnce = new Set();

/** What to answer to one request body: { blocks, delayMs, error }. */
export function plan(body) {
	const messages = Array.isArray(body.messages) ? body.messages : [];
	const last = messages[messages.length - 1];
	if (systemText(body).includes(SUMMARY_MARKER)) {
		return { blocks: [{ type: "text", chunks: ["## Goal\n", "Fake summary."] }], delayMs: 0 };
	}
	if (last && Array.isArray(last.content) && last.content.some((b) => b.type === "tool_result")) {
		const first = last.content.find((b) => b.type === "tool_result");
		const out = typeof first.content === "string" ? first.content : textOf(first.content);
		const line = out.split("\n")[0];
		return { blocks: [{ type: "text", chunks: ["done: ", line] }], delayMs: 0 };
	}
	const text = last ? textOf(last.content) : "";
	const delay = /\[\[slow:(\d+)\]\]/.exec(text);
	const fail = /\[\[fail:(\d+)\]\]/.exec(text);
	if (fail) return { error: Number(fail[1]) };
	if (text.includes("[[overflow-once]]") && !failedOnce.has(text)) {
		failedOnce.add(text);
		return { error: 400, overflow: true };
	}
	const once = /\[\[fail-once:(\d+)\]\]/.exec(text);
	if (once && !failedOnce.has(text)) {
		failedOnce.add(text);
		return { error: Number(once[1]) };
	}
	const calls = [...text.matchAll(/\[\[bash:([^\]]*)\]\]|\[\[tool:([\w-]+):(\{.*?\})\]\]/g)].map((m) =>
		m[1] !== undefined ? { name: "bash", input: { command: m[1] } } : { name: m[2], input: JSON.parse(m[3]) },
	);
	if (calls.length > 0) {
		return {
			blocks: calls.map((call, i) => ({ type: "tool_use", id: `toolu_${i + 1}`, ...call })),
			delayMs: delay ? Number(delay[1]) : 0,
		};
	}
	const chunks = delay ? ["echo: ", ...Array.from({ length: 5 }, () => "."), text] : ["echo: ", text];
	return { blocks: [{ type: "text", chunks }], delayMs: delay ? Number(delay[1]) : 0 };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function stream(res, body, p, seq) {
	res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
	const send = (name, obj) =>
		new Promise((resolve) => {
			if (res.destroyed) return resolve(false);
			res.write(`event: ${name}\ndata: ${JSON.stringify(obj)}\n\n`, () => resolve(true));
		});
	const usage = { input_tokens: 100, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 };
	await send("message_start", {
		type: "message_start",
		message: {
			id: `msg_fake_${seq}`,
			type: "message",
			role: "assistant",
			model: body.model ?? "fake-model",
			content: [],
			stop_reason: null,
			stop_sequence: null,
			usage,
		},
	});
	let out = 0;
	for (const [index, b] of p.blocks.entries()) {
		if (b.type === "text") {
			await send("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } });
			for (const c of b.chunks) {
				if (p.delayMs) await sleep(p.delayMs);
				if (res.destroyed) return;
				out += 1;
				await send("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: c } });
			}
		} else {
			if (p.delayMs) await sleep(p.delayMs);
			await send("content_block_start", {
				type: "content_block_start",
				index,
				content_block: { type: "tool_use", id: b.id, name: b.name, input: {} },
			});
			out += 1;
			await send("content_block_delta", {
				type: "content_block_delta",
				index,
				delta: { type: "input_json_delta", partial_json: JSON.stringify(b.input) },
			});
		}
		await send("content_block_stop", { type: "content_block_stop", index });
	}
	const stop = p.blocks.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn";
	await send("message_delta", { type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: out } });
	await send("message_stop", { type: "message_stop" });
	res.end();
}

/** Start the server; resolves to { port, url, requests, close() }. */
export function startFakeLlm() {
	const requests = [];
	let seq = 0;
	const server = http.createServer((req, res) => {
		const chunks = [];
		req.on("data", (c) => chunks.push(c));
		req.on("end", () => {
			let body = {};
			try {
				body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
			} catch {
				body = {};
			}
			seq += 1;
			requests.push(body);
			if (!req.url.split("?")[0].replace(/\/$/, "").endsWith("/messages")) {
				res.writeHead(404, { "content-type": "application/json" });
				res.end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: req.url } }));
				return;
			}
			const p = plan(body);
			if (p.error) {
				res.writeHead(p.error, { "content-type": "application/json", "x-should-retry": "false" });
				const error = p.overflow
					? { type: "invalid_request_error", message: "prompt is too long: 250000 tokens > 200000 maximum" }
					: { type: "overloaded_error", message: "Overloaded" };
				res.end(JSON.stringify({ type: "error", error }));
				return;
			}
			stream(res, body, p, seq).catch(() => res.destroy());
		});
	});
	// Agents keep connections alive; do not let them hold the test open.
	server.keepAliveTimeout = 1000;
	return new Promise((resolve) => {
		server.listen(0, "127.0.0.1", () => {
			const { port } = server.address();
			resolve({
				port,
				url: `http://127.0.0.1:${port}`,
				requests,
				close: () =>
					new Promise((r) => {
						server.closeAllConnections?.();
						server.close(() => r());
					}),
			});
		});
	});
}
