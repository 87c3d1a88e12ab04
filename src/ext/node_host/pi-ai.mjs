// pith's stand-in for pi-ai's run-time exports that extensions use (schema helpers).
import { Type } from "./typebox.mjs";

export { Type };

// As pi-ai's: only `description` and `default` of the options are kept.
export function StringEnum(values, options) {
	const s = { type: "string", enum: [...values] };
	if (options?.description) s.description = options.description;
	if (options?.default) s.default = options.default;
	return s;
}

export default { Type, StringEnum };
