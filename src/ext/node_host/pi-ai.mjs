// pith's stand-in for pi-ai's run-time exports that extensions use (schema helpers).
import { Type } from "./typebox.mjs";

export { Type };

export function StringEnum(values, options) {
	return { ...(options ?? {}), type: "string", enum: [...values] };
}

export default { Type, StringEnum };
