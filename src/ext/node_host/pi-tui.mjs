// pith's stand-in for pi-tui: components exist so extensions that build renderers load; RPC
// mode renders nothing (renderers are TUI-only, as in pi's RPC mode).
class Component {
	constructor(...args) {
		this.args = args;
		this.children = [];
	}
	addChild(c) {
		this.children.push(c);
	}
	render() {
		return [];
	}
	invalidate() {}
}
export class Text extends Component {}
export class Container extends Component {}
export class Box extends Component {}
export class Spacer extends Component {}
export class Markdown extends Component {}
export class SelectList extends Component {}
export const Key = new Proxy({}, { get: (_, k) => String(k) });
export const matchesKey = () => false;
export const visibleWidth = (s) => String(s).length;
export const truncateToWidth = (s, w) => String(s).slice(0, w);
export default { Text, Container, Box, Spacer, Markdown, SelectList, Key, matchesKey, visibleWidth, truncateToWidth };
