//! The built-in tools (wording, validation, environment).

/// The built-in tools (wording, validation, environment).
#[derive(Debug)]
pub struct Tools {
    /// How truncation (read, bash) counts lines.
    /// 0.73.1: `Split`; 0.87.1: `IgnoreFinalNewline`.
    pub line_counting: LineCounting,
    /// Whose rules and wording tool-argument validation follows.
    /// 0.73.1: `TypeBoxNullsConverted`; 0.87.1: `TypeBox`; 1.6.0: `PiSchema`.
    pub validation: ValidationDialect,
    /// What an edit that needed fuzzy matching writes.
    /// 0.73.1: `WholeFile`; 0.87.1: `TouchedLines`.
    pub edit_fuzzy_rewrite: FuzzyRewrite,
    /// edit's `details.patch`: a standard unified patch of the change.
    /// 0.73.1: false; 0.87.1: true.
    pub edit_patch: bool,
    /// write's result names the byte count (`Successfully wrote 17 bytes to a.txt`; without:
    /// `Successfully wrote to a.txt`). 0.73.1: true; 0.87.1: false.
    pub write_byte_count: bool,
    /// Which files read returns as images.
    /// 0.73.1: `Reference`; 0.87.1: `MagicBytes`.
    pub read_images: ImageTypes,
    /// bash refuses a timeout that is not a finite positive number of seconds or that a Node.js
    /// timer cannot hold (0.73.1 took those as "no timeout"). 0.73.1: false; 0.87.1: true.
    pub bash_checks_timeout: bool,
    /// A shell killed by a signal nobody asked for (not an abort, not the timeout) exited with
    /// `128 + signal`. 0.73.1: false (no exit code); 0.87.1: true.
    pub bash_signal_exit_codes: bool,
    /// Tool results carry `structuredContent` in `tool_execution_end.result` (bash
    /// `{output,truncated[,full_output_path],exit_code,wall_time_seconds}`, read the file text),
    /// and a bash exit status other than 0 is a result with `isError:true` and no `details:{}`.
    /// 0.73.1: false; 0.87.1: false; 1.6.0: true.
    pub structured_content: bool,
    /// `--tools` takes `+name` / `-name` entries that change the default set (mixing them with
    /// plain names is an error), and `*` patterns in `--tools` and `--exclude-tools`.
    /// 0.73.1: false; 0.87.1: false (exact names); 1.6.0: true.
    pub tool_list_modifiers: bool,
    /// The `codemode` tool exists (`--tools +codemode`, `defaultTools`; docs/codemode.md).
    /// 0.73.1: false; 0.87.1: false (an unknown tool); 1.6.0: true.
    pub codemode: bool,
    /// Whose MCP client pith is.
    /// 0.73.1: `Pith`; 0.87.1: `Pith` (neither pi had MCP); 1.6.0: `Pi`.
    pub mcp: McpDialect,
    /// `find`'s path patterns are anchored at the search path (`src/*.ts` no longer finds
    /// `pkg/src/a.ts`; `**/src/*.ts` finds both), a leading `./` is dropped, and an all-lowercase
    /// path pattern ignores case. 0.73.1, 0.87.1: false (a leading `**/` is added); 1.6.0: true.
    pub find_paths_anchored: bool,
    /// `ls` takes `max(1, floor(limit))` entries; without, the limit as given (`0` or less lists
    /// nothing, `(empty directory)`; `1.5` lists two and says `1.5 entries limit reached. Use
    /// limit=3 for more`). 0.73.1, 0.87.1: false; 1.6.0: true.
    pub ls_limit_floored: bool,
    /// grep's lines are rg's (`--context`, pi 1.6.0): only a line's terminator is removed (a lone
    /// `\r` stays), context windows merge and end at the file's last line (no empty line after a
    /// final newline), a match inside the last allowed match's trailing context shows as context.
    /// Without: the file re-read and split on `\r\n`, `\r` and `\n`, one block per match (pi
    /// 0.73.1 / 0.87.1). 0.73.1, 0.87.1: false; 1.6.0: true.
    pub grep_rg_lines: bool,
    /// grep's and find's `limit` is `max(1, floor(limit))`, one result more is looked for, and
    /// the limit notice appears only when it exists (exactly `limit` results: no notice). Without:
    /// the notice as soon as `limit` results are found, and find passes the limit to fd as given.
    /// 0.73.1, 0.87.1: false; 1.6.0: true.
    pub limits_probed: bool,
}

/// Where MCP servers are configured, how their tools reach the model and how results look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum McpDialect {
    /// pith's own client: `mcpServers` in settings.json and the project's `.mcp.json`, every tool
    /// declared (`mcp__<server>__<tool>`, `-` kept), failures as `extension_error`, the
    /// structured result in `details`.
    #[default]
    Pith,
    /// pi 1.6.0's built-in client: `<agentDir>/mcp.json` and the trusted project's
    /// `.pi/mcp.json`, exposures (`codemode` by default, `deferred` via `tool_search`, `direct`,
    /// `hidden`), the `mcp_servers` prompt section, `details:{server,tool}` with the
    /// `CallToolResult` as `structuredContent`, 20 KB middle truncation, `/mcp` status lines,
    /// problems as one `notify`.
    Pi,
}

/// How lines are counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LineCounting {
    /// Counts the empty piece after a final newline as a line (pi 0.73.1).
    #[default]
    Split,
    /// `splitLinesForCounting` (pi 0.87.1): no line after a final newline, none in an empty text.
    IgnoreFinalNewline,
}

/// The validator of tool arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValidationDialect {
    /// AJV (`allErrors`, `coerceTypes`; the seeds' pi): one error per missing property,
    /// `must NOT`, paths like `/edits/0/newText`; the built-in tools are checked against their
    /// own schema. No version's profile uses it (pi 0.73.1 already validated with TypeBox).
    Ajv,
    /// TypeBox as pi 0.73.1 uses it: [`ValidationDialect::TypeBox`]'s conversions and messages,
    /// but a `null` for an optional property is converted like any other value (`0`, `"null"`,
    /// `false`) instead of being dropped.
    TypeBoxNullsConverted,
    /// TypeBox, pi 0.87.1: a `null` for an optional property that does not accept it is dropped
    /// first, then `Value.Convert` (`null` → `"null"` for a string, `" 5 "` → `5`, `"TRUE"` →
    /// `true`, a non-array → `[value]` for an array), one `required` error naming every missing
    /// property, `must not`, `must be either a or b`, dotted paths (`edits.0.newText`); the
    /// built-in tools are checked against the schema they declare to the model.
    TypeBox,
    /// pi-schema, pi 1.6.0: TypeBox's acceptance and coercions here, with pi-schema's messages:
    /// one `missing` per absent property (at its own path), `expected number, got string`,
    /// `expected one of [...]`, `unknown field`, … (`tools::pi_schema`).
    PiSchema,
}

/// What an edit that needed fuzzy matching writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuzzyRewrite {
    /// The whole file in its fuzzy-normalised form, with the edits applied (pi 0.73.1).
    WholeFile,
    /// Only the lines the edits touch, from the fuzzy form; every other line keeps its original
    /// bytes (pi 0.87.1).
    TouchedLines,
}

/// Which files the read tool returns as images.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageTypes {
    /// PNG, JPEG, GIF and WebP by their signatures (pi 0.73.1).
    Reference,
    /// By magic bytes: JPEG (not JPEG-LS), a PNG that is not animated, GIF, WebP, and BMP
    /// converted to PNG (pi 0.87.1).
    MagicBytes,
}
