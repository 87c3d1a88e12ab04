// pith's stand-in for pi-tui: inert components (RPC mode renders nothing, as pi's), plain-text
// helpers (ANSI escapes have no width, every character one column), no keyboard.
import * as self from "./pi-tui.mjs";
class C {
	constructor(...args) {
		this.args = args;
		this.children = [];
	}
	addChild(c) {
		this.children.push(c);
	}
	removeChild(c) {
		this.children = this.children.filter((x) => x !== c);
	}
	clear() {
		this.children = [];
	}
	setText(t) {
		this.args[0] = t;
	}
	render() {
		return [];
	}
	handleInput() {}
	invalidate() {}
}
export class Text extends C {}
export class TruncatedText extends C {}
export class Container extends C {}
export class Box extends C {}
export class Spacer extends C {}
export class Markdown extends C {}
export class SelectList extends C {}
export class SettingsList extends C {}
export class Input extends C {}
export class Editor extends C {}
export class Loader extends C {}
export class CancellableLoader extends C {}
export class Image extends C {}
export class HStack extends C {}
export class VStack extends C {}
export const Key = new Proxy({}, { get: (_, k) => String(k) });
export const matchesKey = () => false;
export const parseKey = () => undefined;
export const getKeybindings = () => ({ matches: () => false, getKeys: () => [] });
export const stripTerminalSequences = (s) => String(s).replace(/\x1b\[[0-9;:?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, "");
const chars = (s) => [...stripTerminalSequences(s)];
export const visibleWidth = (s) => chars(s).length;
export function truncateToWidth(text, width, ellipsis = "...", pad = false) {
	const c = chars(text);
	const e = [...ellipsis];
	if (width <= 0) return "";
	const s = c.length <= width ? c.join("") : e.length >= width ? e.slice(0, width).join("") : c.slice(0, width - e.length).join("") + ellipsis;
	return pad ? s.padEnd(width) : s;
}
export function wrapTextWithAnsi(text, width) {
	if (!text) return [""];
	return stripTerminalSequences(text)
		.split(/\r\n|\r|\n/)
		.flatMap((l) => {
			const c = [...l];
			if (width <= 0 || c.length <= width) return [l];
			const out = [];
			for (let i = 0; i < c.length; i += width) out.push(c.slice(i, i + width).join(""));
			return out;
		});
}
// The items whose text holds the query's characters in order, the tightest first.
export function fuzzyFilter(items, query, text) {
	const q = String(query).toLowerCase().replace(/\s+/g, "");
	const gaps = (t) => {
		let at = 0;
		let g = 0;
		for (const ch of q) {
			const i = t.indexOf(ch, at);
			if (i < 0) return -1;
			g += i - at;
			at = i + 1;
		}
		return g;
	};
	return items
		.map((item) => ({ item, g: gaps(String(text(item)).toLowerCase()) }))
		.filter((x) => x.g >= 0)
		.sort((a, b) => a.g - b.g)
		.map((x) => x.item);
}
export default self;
