// pith's stand-in for pi-tui: components exist so extensions that build renderers load; RPC
// mode renders nothing (renderers are TUI-only, as in pi's RPC mode). The text helpers work on
// plain text (ANSI escapes count as zero width; wide characters as one column).
class Component {
	constructor(...args) {
		this.args = args;
		this.children = [];
	}
	addChild(c) {
		this.children.push(c);
	}
	removeChild(c) {
		const i = this.children.indexOf(c);
		if (i >= 0) this.children.splice(i, 1);
	}
	clear() {
		this.children = [];
	}
	setText(text) {
		this.args[0] = text;
	}
	render() {
		return [];
	}
	handleInput() {}
	invalidate() {}
}
export class Text extends Component {}
export class TruncatedText extends Component {}
export class Container extends Component {}
export class Box extends Component {}
export class Spacer extends Component {}
export class Markdown extends Component {}
export class SelectList extends Component {}
export class SettingsList extends Component {}
export class Input extends Component {}
export class Editor extends Component {}
export class Loader extends Component {}
export class CancellableLoader extends Component {}
export class Image extends Component {}
export class HStack extends Component {}
export class VStack extends Component {}
export const Key = new Proxy({}, { get: (_, k) => String(k) });
export const matchesKey = () => false;
// No keyboard in RPC mode: no binding ever matches.
export const parseKey = () => undefined;
export const getKeybindings = () => ({ matches: () => false, getKeys: () => [] });
const ANSI = /\x1b\[[0-9;:?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g;
export const stripTerminalSequences = (s) => String(s).replace(ANSI, "");
export const visibleWidth = (s) => [...stripTerminalSequences(s)].length;
export function truncateToWidth(text, maxWidth, ellipsis = "...", pad = false) {
	const chars = [...stripTerminalSequences(text)];
	if (maxWidth <= 0) return "";
	let s;
	if (chars.length <= maxWidth) s = chars.join("");
	else {
		const e = [...ellipsis];
		s = e.length >= maxWidth ? e.slice(0, maxWidth).join("") : chars.slice(0, maxWidth - e.length).join("") + ellipsis;
	}
	return pad ? s + " ".repeat(Math.max(0, maxWidth - visibleWidth(s))) : s;
}
// Items whose text (`getText(item)`) holds the query's characters in order, best first.
export function fuzzyFilter(items, query, getText) {
	const q = String(query).toLowerCase().replace(/\s+/g, "");
	if (!q) return items;
	const score = (t) => {
		let at = 0;
		let gaps = 0;
		for (const c of q) {
			const i = t.indexOf(c, at);
			if (i < 0) return -1;
			gaps += i - at;
			at = i + 1;
		}
		return gaps;
	};
	return items
		.map((item) => ({ item, s: score(String(getText(item)).toLowerCase()) }))
		.filter((x) => x.s >= 0)
		.sort((a, b) => a.s - b.s)
		.map((x) => x.item);
}
export function wrapTextWithAnsi(text, width) {
	if (!text) return [""];
	const out = [];
	for (const line of stripTerminalSequences(text).split(/\r\n|\r|\n/)) {
		const chars = [...line];
		if (width <= 0 || chars.length <= width) {
			out.push(line);
			continue;
		}
		for (let i = 0; i < chars.length; i += width) out.push(chars.slice(i, i + width).join(""));
	}
	return out;
}
export default {
	Text,
	TruncatedText,
	Container,
	Box,
	Spacer,
	Markdown,
	SelectList,
	SettingsList,
	Input,
	Editor,
	Loader,
	CancellableLoader,
	Image,
	HStack,
	VStack,
	Key,
	matchesKey,
	getKeybindings,
	parseKey,
	fuzzyFilter,
	stripTerminalSequences,
	visibleWidth,
	truncateToWidth,
	wrapTextWithAnsi,
};
