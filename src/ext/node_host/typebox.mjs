// pith's stand-in for TypeBox when the extension's own copy does not resolve: the schema
// builders extensions use, producing plain JSON schema (what pith sends to the model and
// validates against) with TypeBox 1.x's keys in TypeBox's order (the builder's, then the
// options). No compiler or `Value` helpers.
const OPTIONAL = Symbol.for("TypeBox.Optional");

const opts = (o) => (o && typeof o === "object" ? o : {});
const make = (base, o) => ({ ...base, ...opts(o) });

export const Type = {
	String: (o) => make({ type: "string" }, o),
	Number: (o) => make({ type: "number" }, o),
	Integer: (o) => make({ type: "integer" }, o),
	Boolean: (o) => make({ type: "boolean" }, o),
	Null: (o) => make({ type: "null" }, o),
	Any: (o) => make({}, o),
	Unknown: (o) => make({}, o),
	Literal: (v, o) => make({ type: typeof v, const: v }, o),
	Array: (items, o) => make({ type: "array", items }, o),
	Tuple: (items, o) => make({ type: "array", additionalItems: false, items, minItems: items.length }, o),
	Union: (anyOf, o) => make({ anyOf }, o),
	Enum: (e, o) => make({ enum: Object.values(e) }, o),
	Record: (_k, v, o) => make({ type: "object", patternProperties: { "^.*$": v } }, o),
	Optional: (s) => {
		const c = { ...s };
		Object.defineProperty(c, OPTIONAL, { value: true, enumerable: false });
		return c;
	},
	Object: (properties, o) => {
		const required = Object.keys(properties).filter((k) => !properties[k]?.[OPTIONAL]);
		return make(required.length ? { type: "object", required, properties } : { type: "object", properties }, o);
	},
};

export default { Type };
