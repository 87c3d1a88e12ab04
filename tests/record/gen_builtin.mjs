// Regenerates src/llm/models/catalog_073.rs from pi-ai's models.generated.js (pi 0.73.1):
//   node tests/record/gen_builtin.mjs <path to @mariozechner/pi-ai/dist> > src/llm/models/catalog_073.rs
// and prints the locale-sorted ids for fixtures/config/builtin_ids_locale_sorted.txt with --ids.
//
// Every built-in provider of pi 0.73.1 is shipped (`ONLY=a,b` narrows the list for experiments).
// The table is text, one line per model, parsed when the registry is built (`table.rs`): about a
// third of the size of the same rows as Rust structs, and no relocation per string in the static
// binary.
//
// With --v087 (pi 0.87.1's pi-ai dist, @earendil-works/pi-ai) it writes catalog_087.rs, the table
// `--compat 0.87` uses: 0.87.1's providers but Baseten (its chat template arguments) and Radius
// (pi's own API), with their models, tiered prices, `promptCache`, `inputLimits` and each model's
// key order:
//   node tests/record/gen_builtin.mjs <@earendil-works/pi-ai/dist> --v087 > src/llm/models/catalog_087.rs
//
// With --v16 (pi 1.6.0's pi-ai dist, @earendil-works/pi-ai 1.6.0; run it with the node 22 pi 1.6.0
// needs) it writes catalog_16.rs, the table `--compat 1.6` uses: the same row format as 0.87.1's
// and the same two providers left out. 1.6.0's catalog gives every model `"type":"chat"` (classifier
// and image models live outside the catalog, in codemode's `models.*`): the generator checks that it
// is "chat" and records only where the key sits in the model's key order (letter `y`).
//   node tests/record/gen_builtin.mjs <@earendil-works/pi-ai/dist> --v16 > src/llm/models/catalog_16.rs
import { pathToFileURL } from "node:url";
import path from "node:path";

const dist = process.argv[2];
const { MODELS } = await import(pathToFileURL(path.join(dist, "models.generated.js")).href);

const V16 = process.argv.includes("--v16");
// --v16 writes the 0.87.1 row format (tiers, promptCache, inputLimits, key order) plus `type`.
const V087 = V16 || process.argv.includes("--v087");
// pi 0.87.1's (and 1.6.0's) providers that pith does not build in.
const NOT_087 = ["baseten", "radius"];
const providers = Object.keys(MODELS)
  .filter((p) => !process.env.ONLY || process.env.ONLY.split(",").includes(p))
  .filter((p) => !V087 || !NOT_087.includes(p))
  // 1.6.0: a provider with classifier/image models only (typesafe) has no chat model to list.
  .filter((p) => !V16 || Object.keys(MODELS[p]).length > 0);
const EMPTY = Object.keys(MODELS).filter((p) => V16 && Object.keys(MODELS[p]).length === 0);

if (process.argv.includes("--ids")) {
  const ids = providers.flatMap((p) => Object.values(MODELS[p]).map((m) => m.id));
  ids.sort((a, b) => a.localeCompare(b));
  process.stdout.write(ids.join("\n") + "\n");
  process.exit(0);
}

const KNOWN = ["id", "name", "api", "provider", "baseUrl", "reasoning", "input", "cost", "contextWindow", "maxTokens",
  "compat", "thinkingLevelMap", "headers", ...(V087 ? ["promptCache", "inputLimits"] : []), ...(V16 ? ["type"] : [])];
// A model's keys in its JSON order, one letter each (pi 0.87.1's catalog has no fixed order).
const ORDER_LETTER = { id: "i", name: "n", api: "a", provider: "p", baseUrl: "u", reasoning: "r", thinkingLevelMap: "t",
  input: "I", cost: "$", contextWindow: "w", maxTokens: "m", compat: "c", headers: "h", promptCache: "P", inputLimits: "L",
  type: "y" };
const fail = (why) => {
  process.stderr.write(`gen_builtin: ${why}\n`);
  process.exit(1);
};
const rustStr = (s) => JSON.stringify(s);
const LEVEL = { off: "Off", minimal: "Minimal", low: "Low", medium: "Medium", high: "High", xhigh: "Xhigh",
  ...(V087 ? { max: "Max" } : {}) };
// Distinct values shared by index: thinking maps, compat objects, header sets (and for 0.87.1 price
// tiers, promptCache / inputLimits objects, key orders).
const interned = { tlm: [], compat: [], headers: [], tiers: [], json: [], order: [] };
const intern = (kind, value) => {
  const key = JSON.stringify(value);
  let i = interned[kind].indexOf(key);
  if (i < 0) {
    interned[kind].push(key);
    i = interned[kind].length - 1;
  }
  return i;
};
const constName = (p) => p.toUpperCase().replace(/-/g, "_");
const clean = (s, what) => {
  if (typeof s !== "string" || /[|\n\r]/.test(s) || s.includes('"#')) fail(`${what} ${JSON.stringify(s)} cannot be written in a row`);
  return s;
};

let body = "";
for (const p of providers) {
  const models = Object.values(MODELS[p]);
  const api = models[0].api;
  const baseUrl = models[0].baseUrl;
  const rows = [];
  for (const m of models) {
    const unknown = Object.keys(m).filter((k) => !KNOWN.includes(k));
    if (unknown.length) fail(`${p}/${m.id}: fields ${unknown} are not carried by the table`);
    if (m.provider !== p) fail(`${p}/${m.id}: provider ${m.provider}`);
    if (V16 && m.type !== "chat") fail(`${p}/${m.id}: type ${JSON.stringify(m.type)} (only "chat" is carried)`);
    if (!Number.isInteger(m.contextWindow) || !Number.isInteger(m.maxTokens)) fail(`${p}/${m.id}: non-integer limits`);
    const input = m.input.join(",");
    if (input !== "text" && input !== "text,image") fail(`${p}/${m.id}: input ${input}`);
    const c = m.cost;
    const costKeys = Object.keys(c).join(",");
    if (costKeys !== "input,output,cacheRead,cacheWrite" && !(V087 && costKeys === "input,output,cacheRead,cacheWrite,tiers")) {
      fail(`${p}/${m.id}: cost keys ${costKeys}`);
    }
    const cost = [c.input, c.output, c.cacheRead, c.cacheWrite].map((n) => {
      if (typeof n !== "number" || !Number.isFinite(n)) fail(`${p}/${m.id}: cost ${n}`);
      return String(n);
    });
    const flags = (m.reasoning ? "r" : "-") + (input === "text,image" ? "i" : "-");
    let row = [clean(m.id, "id"), clean(m.name, "name"), flags, cost.join(" "), m.contextWindow, m.maxTokens].join("|");
    if (m.thinkingLevelMap) {
      for (const k of Object.keys(m.thinkingLevelMap)) if (!LEVEL[k]) fail(`${p}/${m.id}: thinking level ${k}`);
      row += `|t${intern("tlm", m.thinkingLevelMap)}`;
    }
    if (m.compat) row += `|c${intern("compat", m.compat)}`;
    if (m.headers) row += `|h${intern("headers", m.headers)}`;
    if (m.api !== api) row += `|a${clean(m.api, "api")}`;
    if (m.baseUrl !== baseUrl) row += `|u${clean(m.baseUrl, "baseUrl")}`;
    if (V087) {
      if (c.tiers) {
        for (const t of c.tiers) {
          if (Object.keys(t).join(",") !== "inputTokensAbove,input,output,cacheRead,cacheWrite") fail(`${p}/${m.id}: tier ${JSON.stringify(t)}`);
          for (const v of Object.values(t)) if (typeof v !== "number" || !Number.isFinite(v)) fail(`${p}/${m.id}: tier ${JSON.stringify(t)}`);
        }
        row += `|T${intern("tiers", c.tiers)}`;
      }
      if (m.promptCache) row += `|P${intern("json", m.promptCache)}`;
      if (m.inputLimits) row += `|L${intern("json", m.inputLimits)}`;
      row += `|o${intern("order", Object.keys(m).map((k) => ORDER_LETTER[k]).join(""))}`;
    }
    rows.push(row);
  }
  body += `\npub(super) const ${constName(p)}: BuiltinProvider = BuiltinProvider {\n`;
  body += `    name: ${rustStr(p)},\n    api: ${rustStr(api)},\n    base_url: ${rustStr(baseUrl)},\n`;
  body += `    models: Rows(r#"\n${rows.join("\n")}\n"#),\n};\n`;
}

let out = V16 ? `//! Built-in model table of pi 1.6.0 (\`--compat 1.6\`): pi-ai 1.6.0's model catalog but Baseten
//! and Radius, in the reference's provider order and file order. Facts only (ids, names,
//! prices with their tiers, limits, \`promptCache\`, \`inputLimits\`, the order of each model's keys).
//! Generated by \`tests/record/gen_builtin.mjs --v16\` from the published package; do not edit by
//! hand.
//!
//! Rows as in \`catalog_087.rs\` (\`T<n>\` price tiers, \`P<n>\` promptCache, \`L<n>\` inputLimits,
//! \`o<n>\` the model's key order). Every model of 1.6.0's catalog has \`"type":"chat"\`: the value is
//! not in the rows, only its place in the key order (letter \`y\`).
//! Providers of the catalog without a chat model are left out: ${EMPTY.join(", ")}.

use super::table::{BuiltinProvider, Rows};
use crate::llm::CostTier;
use crate::message::ThinkingLevel::{self, *};

/// Distinct \`thinkingLevelMap\`s: \`None\` = level unsupported, \`Some(v)\` = provider-specific value.
pub(super) const THINKING: &[&[(ThinkingLevel, Option<&str>)]] = &[
` : V087 ? `//! Built-in model table of pi 0.87.1 (\`--compat 0.87\`): pi-ai 0.87.1's model catalog but Baseten
//! and Radius, in the reference's provider order and file order. Facts only (ids, names,
//! prices with their tiers, limits, \`promptCache\`, \`inputLimits\`, the order of each model's keys).
//! Generated by \`tests/record/gen_builtin.mjs --v087\` from the published package; do not edit by
//! hand.
//!
//! Rows as in \`catalog_073.rs\`, with more optional fields: \`T<n>\` price tiers, \`P<n>\` promptCache and
//! \`L<n>\` inputLimits (indexes into the tables below), \`o<n>\` the model's key order.

use super::table::{BuiltinProvider, Rows};
use crate::llm::CostTier;
use crate::message::ThinkingLevel::{self, *};

/// Distinct \`thinkingLevelMap\`s: \`None\` = level unsupported, \`Some(v)\` = provider-specific value.
pub(super) const THINKING: &[&[(ThinkingLevel, Option<&str>)]] = &[
` : `//! Built-in model table: the reference's \`models.generated.ts\` (pi-ai 0.73.1), every provider, in
//! the reference's provider order and file order. Facts only (ids, names, prices, limits).
//! Generated by \`tests/record/gen_builtin.mjs\` from the published package; do not edit by hand.
//!
//! One line per model: \`id|name|flags|input output cacheRead cacheWrite|contextWindow|maxTokens\`,
//! flags \`r\` reasoning and \`i\` image input, then optional fields: \`t<n>\` thinking map, \`c<n>\`
//! compat, \`h<n>\` headers (indexes into the tables below), \`a<api>\` and \`u<baseUrl>\` where they
//! differ from the provider's.

use super::table::{BuiltinProvider, Rows};
use crate::message::ThinkingLevel::{self, *};

/// Distinct \`thinkingLevelMap\`s: \`None\` = level unsupported, \`Some(v)\` = provider-specific value.
pub(super) const THINKING: &[&[(ThinkingLevel, Option<&str>)]] = &[
`;
for (const key of interned.tlm) {
  const entries = Object.entries(JSON.parse(key)).map(([k, v]) => `(${LEVEL[k]}, ${v === null ? "None" : `Some(${rustStr(v)})`})`);
  out += `    &[${entries.join(", ")}],\n`;
}
out += `];\n\n/// Distinct \`compat\` objects, as JSON text.\npub(super) const COMPAT: &[&str] = &[\n`;
for (const key of interned.compat) out += `    ${rustStr(key)},\n`;
out += `];\n\n/// Distinct header sets.\npub(super) const HEADERS: &[&[(&str, &str)]] = &[\n`;
for (const key of interned.headers) {
  out += `    &[${Object.entries(JSON.parse(key)).map(([k, v]) => `(${rustStr(k)}, ${rustStr(v)})`).join(", ")}],\n`;
}
if (V087) {
  const num = (n) => (Number.isInteger(n) ? `${n}.0` : String(n));
  out += `];\n\n/// Distinct price tiers.\npub(super) const TIERS: &[&[CostTier]] = &[\n`;
  for (const key of interned.tiers) {
    const tiers = JSON.parse(key).map((t) => `CostTier { input_tokens_above: ${num(t.inputTokensAbove)}, input: ${num(t.input)}, output: ${num(t.output)}, cache_read: ${num(t.cacheRead)}, cache_write: ${num(t.cacheWrite)} }`);
    out += `    &[${tiers.join(", ")}],\n`;
  }
  out += "];\n\n/// Distinct `promptCache` and `inputLimits` objects, as JSON text.\npub(super) const JSON: &[&str] = &[\n";
  for (const key of interned.json) out += `    ${rustStr(key)},\n`;
  out += "];\n\n/// Distinct key orders (letters as `table.rs` reads them).\npub(super) const ORDERS: &[&str] = &[\n";
  for (const key of interned.order) out += `    ${rustStr(JSON.parse(key))},\n`;
}
out += `];\n\n/// Providers in the reference's registry order.\npub(super) const PROVIDERS: &[BuiltinProvider] = &[\n`;
out += providers.map((p) => `    ${constName(p)},\n`).join("");
out += `];\n`;
process.stdout.write(out + body);
