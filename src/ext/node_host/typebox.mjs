// pith's stand-in for TypeBox when the extension's own copy does not resolve: the schema
// builders extensions use, producing plain JSON schema (what pith sends to the model and
// validates against). No compiler or `Value` helpers.
const OPTIONAL = Symbol.for("TypeBox.Optional");

function opts(o) {
	return o && typeof o === "object" ? { ...o } : {};
}

export const Type = {
	String: (o) => ({ ...opts(o), type: "string" }),
	Number: (o) => ({ ...opts(o), type: "number" }),
	Integer: (o) => ({ ...opts(o), type: "integer" }),
	Boolean: (o) => ({ ...opts(o), type: "boolean" }),
	Null: (o) => ({ ...opts(o), type: "null" }),
	Any: (o) => ({ ...opts(o) }),
	Unknown: (o) => ({ ...opts(o) }),
	Literal: (v, o) => ({ ...opts(o), const: v, type: typeof v }),
	Array: (items, o) => ({ ...opts(o), type: "array", items }),
	Tuple: (items, o) => ({ ...opts(o), type: "array", items, minItems: items.length, maxItems: items.length }),
	Union: (anyOf, o) => ({ ...opts(o), anyOf }),
	Enum: (e, o) => ({ ...opts(o), enum: Object.values(e) }),
	Record: (_k, v, o) => ({ ...opts(o), type: "object", additionalProperties: v }),
	Optional: (s) => {
		const c = { ...s };
		Object.defineProperty(c, OPTIONAL, { value: true, enumerable: false });
		return c;
	},
	Object: (properties, o) => {
		const required = Object.keys(properties).filter((k) => !properties[k]?.[OPTIONAL]);
		const s = { ...opts(o), type: "object", properties };
		if (required.length) s.required = required;
		return s;
	},
};

export default { Type };
