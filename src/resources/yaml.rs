//! The YAML that skill and prompt-template frontmatter uses, parsed the way pi's `yaml` package
//! (2.x, YAML 1.2 core schema) parses it — without a YAML dependency.
//!
//! Supported: block mappings and sequences (nested by indentation, compact `- key: v` items,
//! sequences at their key's column), plain scalars (multi-line, folded), single- and
//! double-quoted scalars (escapes, multi-line folding), literal and folded block scalars (`|`, `>`,
//! chomping `+`/`-`, indentation indicator), flow sequences and mappings (nested, multi-line,
//! trailing commas), comments, anchors and aliases, tags (`!!str` forces a string; other tags are
//! ignored, as pi's parser only warns about them), the `...` document end marker. Core-schema
//! scalar types: `null`/`~`, booleans, decimal/octal/hex integers, floats.
//!
//! Rejected with an error, as pi rejects them (so the file is skipped as pi skips it): `key: a: b`
//! ("Nested mappings are not allowed in compact mappings"), duplicate keys, tab indentation,
//! plain values starting with `@`, `` ` `` or `%`, `- x` on a key's line, text after a closed
//! quoted scalar or flow collection, bad indentation, unterminated quotes and brackets, invalid
//! escapes, bad block scalar headers, unknown aliases. Not supported (a clear error rather than a
//! guess): complex keys (`? `), directives (`%YAML`), more than one document.
//!
//! Values come out as `serde_json::Value`, which is what pi's code sees (a JS object): the loaders
//! apply pi's JS-level rules (`description || ""`, `=== true`, `typeof x === "string"`) to them.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Number, Value};

/// A parse error: what and where (1-based line and column within the frontmatter text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    pub message: String,
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at line {}, column {}",
            self.message, self.line, self.col
        )
    }
}

impl std::error::Error for YamlError {}

/// Nesting deeper than this is refused (a hostile file cannot blow the stack).
const MAX_DEPTH: usize = 64;

/// Parse one YAML document. An empty document (only blanks and comments) is `Null`.
pub fn parse(src: &str) -> Result<Value, YamlError> {
    let mut lines: Vec<&str> = src.split('\n').collect();
    if src.ends_with('\n') {
        lines.pop();
    }
    let mut p = Parser {
        terminated: src.ends_with('\n'),
        lines,
        line: 0,
        col: 0,
        anchors: HashMap::new(),
        depth: 0,
    };
    p.document()
}

struct Parser<'a> {
    lines: Vec<&'a str>,
    /// The text ends with a line break (else its last line is unterminated).
    terminated: bool,
    /// Current line and byte offset in it (content before `col` is consumed).
    line: usize,
    col: usize,
    anchors: HashMap<String, Value>,
    depth: usize,
}

fn is_blank(s: &str) -> bool {
    s.bytes().all(|b| b == b' ' || b == b'\t')
}

fn indent_of(s: &str) -> usize {
    s.bytes().take_while(|&b| b == b' ').count()
}

/// Where a plain scalar's comment starts (`#` at the start or after whitespace), if anywhere.
fn comment_start(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    (0..b.len()).find(|&i| b[i] == b'#' && (i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t'))
}

/// The offset of the `:` of an implicit key in a plain line (`:` followed by a blank or the end),
/// before any comment.
fn plain_key_colon(s: &str) -> Option<usize> {
    let end = comment_start(s).unwrap_or(s.len());
    let b = &s.as_bytes()[..end];
    (0..b.len())
        .find(|&i| b[i] == b':' && (i + 1 == b.len() || b[i + 1] == b' ' || b[i + 1] == b'\t'))
}

/// A line's text and the YAML line number of `line` (1-based).
impl<'a> Parser<'a> {
    fn err<T>(&self, line: usize, col: usize, message: impl Into<String>) -> Result<T, YamlError> {
        Err(YamlError {
            message: message.into(),
            line: line + 1,
            col: col + 1,
        })
    }

    fn cur(&self) -> &'a str {
        self.lines.get(self.line).copied().unwrap_or("")
    }

    /// The rest of the current line from `col`.
    fn rest(&self) -> &'a str {
        let l = self.cur();
        l.get(self.col..).unwrap_or("")
    }

    /// Skip spaces and tabs on the current line.
    fn skip_inline_ws(&mut self) {
        let r = self.rest();
        self.col += r.len() - r.trim_start_matches([' ', '\t']).len();
    }

    /// True when the rest of the current line is empty or a comment.
    fn rest_is_empty(&self) -> bool {
        let r = self.rest().trim_start_matches([' ', '\t']);
        r.is_empty() || r.starts_with('#')
    }

    /// Move to the next line that has content (not blank, not only a comment), starting with the
    /// rest of the current line. Returns its (line, indent) and leaves the position at its
    /// content; `None` at the end of the document.
    fn next_content(&mut self) -> Option<(usize, usize)> {
        if self.col == 0 && !self.rest_is_empty() {
            // A fresh line: its indentation is spaces only (a tab there is an error later).
            self.col = indent_of(self.cur());
            return Some((self.line, self.col));
        }
        if !self.rest_is_empty() {
            self.skip_inline_ws();
            return Some((self.line, self.col));
        }
        let mut i = self.line + 1;
        while i < self.lines.len() {
            let l = self.lines[i];
            let t = l.trim_start_matches([' ', '\t']);
            if !t.is_empty() && !t.starts_with('#') {
                self.line = i;
                self.col = indent_of(l);
                return Some((i, self.col));
            }
            i += 1;
        }
        self.line = self.lines.len();
        self.col = 0;
        None
    }

    /// Consume the rest of the current line, which must be empty or a comment.
    fn end_of_node(&mut self) -> Result<(), YamlError> {
        if !self.rest_is_empty() {
            self.skip_inline_ws();
            return self.err(self.line, self.col, "Unexpected scalar at node end");
        }
        self.col = self.cur().len();
        Ok(())
    }

    fn document(&mut self) -> Result<Value, YamlError> {
        let Some((line, col)) = self.next_content() else {
            return Ok(Value::Null);
        };
        let l = self.cur();
        if col == 0 && l.starts_with('%') {
            return self.err(line, col, "Directives are not supported in frontmatter");
        }
        if col == 0 && (l == "..." || l.starts_with("... ")) {
            return self.document_end();
        }
        let v = self.node(-1, true)?;
        match self.next_content() {
            None => Ok(v),
            Some((line, 0)) if self.cur() == "..." || self.cur().starts_with("... ") => {
                let _ = line;
                self.document_end().map(|_| v)
            }
            Some((line, col)) => self.err(line, col, "Unexpected content after the document"),
        }
    }

    /// After a `...` marker only blanks and comments may follow.
    fn document_end(&mut self) -> Result<Value, YamlError> {
        self.col = self.cur().len();
        match self.next_content() {
            None => Ok(Value::Null),
            Some((line, col)) => self.err(line, col, "Source contains multiple documents"),
        }
    }

    fn enter(&mut self) -> Result<(), YamlError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(self.line, self.col, "Nesting too deep");
        }
        Ok(())
    }

    /// A node whose first content is at the current position; `parent` is the indentation of
    /// the enclosing block (-1 at the top). `block` allows block collections here.
    fn node(&mut self, parent: isize, block: bool) -> Result<Value, YamlError> {
        self.enter()?;
        let r = self.node_inner(parent, block);
        self.depth -= 1;
        r
    }

    fn node_inner(&mut self, parent: isize, block: bool) -> Result<Value, YamlError> {
        let col = self.col;
        let rest = self.rest();
        if rest.starts_with('\t') {
            return self.err(self.line, col, "Tabs are not allowed as indentation");
        }
        if block && is_seq_item(rest) {
            return self.block_seq(col);
        }
        if block && self.is_map_entry()? {
            return self.block_map(col);
        }
        self.inline_value(parent)
    }

    /// Does the current position start an implicit `key: value` entry?
    fn is_map_entry(&self) -> Result<bool, YamlError> {
        let rest = self.rest();
        if rest.starts_with("? ") || rest == "?" {
            return self.err(
                self.line,
                self.col,
                "Complex mapping keys are not supported",
            );
        }
        if rest.starts_with('"') || rest.starts_with('\'') {
            let Some(end) = quoted_end_on_line(rest) else {
                return Ok(false);
            };
            let after = rest[end..].trim_start_matches([' ', '\t']);
            return Ok(
                after.starts_with(':') && (after.len() == 1 || after[1..].starts_with([' ', '\t']))
            );
        }
        if rest.starts_with(['[', '{', '&', '*', '!', '|', '>']) {
            return Ok(false);
        }
        Ok(plain_key_colon(rest).is_some())
    }

    fn block_map(&mut self, indent: usize) -> Result<Value, YamlError> {
        let mut map = Map::new();
        loop {
            let (kline, kcol) = (self.line, self.col);
            let key = self.map_key()?;
            if map.contains_key(&key) {
                return self.err(kline, kcol, "Map keys must be unique");
            }
            let value = self.map_value(indent)?;
            map.insert(key, value);
            match self.next_content() {
                None => break,
                Some((_, col)) if col < indent => break,
                Some((line, col)) if col > indent => {
                    return self.err(line, col, "All mapping items must start at the same column");
                }
                Some((line, col)) => {
                    if self.cur() == "..." && col == 0 {
                        break;
                    }
                    if self.rest().starts_with('\t') {
                        return self.err(line, col, "Tabs are not allowed as indentation");
                    }
                    if is_seq_item(self.rest()) {
                        return self.err(
                            line,
                            col,
                            "A block sequence may not be used as an implicit map key",
                        );
                    }
                    if !self.is_map_entry()? {
                        return self.err(
                            line,
                            col,
                            "Implicit map keys need to be followed by map values",
                        );
                    }
                }
            }
        }
        Ok(Value::Object(map))
    }

    /// Read `key:` at the current position (already known to be an entry).
    fn map_key(&mut self) -> Result<String, YamlError> {
        let rest = self.rest();
        if rest.starts_with('"') || rest.starts_with('\'') {
            let (line, col) = (self.line, self.col);
            let v = self.quoted(-1)?;
            if self.line != line {
                return self.err(line, col, "Implicit keys need to be on a single line");
            }
            self.skip_inline_ws();
            // The ':' (checked by is_map_entry).
            self.col += 1;
            return Ok(key_string(&v));
        }
        let colon = plain_key_colon(rest).unwrap_or(rest.len());
        let raw = rest[..colon].trim_end_matches([' ', '\t']);
        self.col += colon + 1;
        Ok(key_string(&resolve_plain(raw)))
    }

    /// The value after `key:` in a mapping at `indent`.
    fn map_value(&mut self, indent: usize) -> Result<Value, YamlError> {
        self.skip_inline_ws();
        let (anchor, tag) = self.properties()?;
        let v = if self.rest_is_empty() {
            let here = self.line;
            self.col = self.cur().len();
            match self.next_content() {
                Some((_, col)) if col > indent => self.node(indent as isize, true)?,
                Some((line, col)) if col == indent && is_seq_item(self.rest()) && line > here => {
                    self.block_seq(col)?
                }
                _ => Value::Null,
            }
        } else {
            let rest = self.rest();
            if is_seq_item(rest) {
                return self.err(
                    self.line,
                    self.col,
                    "Unexpected block-seq-ind on same line with key",
                );
            }
            self.inline_value(indent as isize)?
        };
        self.finish_properties(v, anchor, tag)
    }

    fn block_seq(&mut self, indent: usize) -> Result<Value, YamlError> {
        let mut items = Vec::new();
        loop {
            // At '-'.
            self.col += 1;
            self.skip_inline_ws();
            let (anchor, tag) = self.properties()?;
            let item = if self.rest_is_empty() {
                self.col = self.cur().len();
                match self.next_content() {
                    Some((_, col)) if col > indent => self.node(indent as isize, true)?,
                    _ => Value::Null,
                }
            } else if anchor.is_none() && tag.is_none() {
                // Compact nested collection on the item's line: its column is its indentation.
                self.node(indent as isize, true)?
            } else {
                self.inline_value(indent as isize)?
            };
            items.push(self.finish_properties(item, anchor, tag)?);
            match self.next_content() {
                None => break,
                Some((_, col)) if col < indent => break,
                Some((line, col)) if col > indent => {
                    return self.err(
                        line,
                        col,
                        "All sequence items must start at the same column",
                    );
                }
                Some(_) => {
                    if !is_seq_item(self.rest()) {
                        break;
                    }
                }
            }
        }
        Ok(Value::Array(items))
    }

    /// Anchor (`&a`) and tag (`!t`) properties before a value, in either order.
    fn properties(&mut self) -> Result<(Option<String>, Option<String>), YamlError> {
        let mut anchor = None;
        let mut tag = None;
        loop {
            let rest = self.rest();
            if rest.starts_with('&') && anchor.is_none() {
                let name = prop_name(&rest[1..]);
                if name.is_empty() {
                    return self.err(self.line, self.col, "Anchor name is missing");
                }
                anchor = Some(name.to_string());
                self.col += 1 + name.len();
            } else if rest.starts_with('!') && tag.is_none() {
                let name = prop_name(rest);
                tag = Some(name.to_string());
                self.col += name.len();
            } else {
                return Ok((anchor, tag));
            }
            self.skip_inline_ws();
        }
    }

    fn finish_properties(
        &mut self,
        v: Value,
        anchor: Option<String>,
        tag: Option<String>,
    ) -> Result<Value, YamlError> {
        let v = match tag.as_deref() {
            Some("!!str") => match v {
                Value::Null => Value::String(String::new()),
                Value::Bool(b) => Value::String(b.to_string()),
                Value::Number(n) => Value::String(n.to_string()),
                other => other,
            },
            _ => v,
        };
        if let Some(a) = anchor {
            self.anchors.insert(a, v.clone());
        }
        Ok(v)
    }

    /// A scalar or flow collection starting at the current position (not a block collection).
    fn inline_value(&mut self, parent: isize) -> Result<Value, YamlError> {
        let rest = self.rest();
        let (line, col) = (self.line, self.col);
        let Some(c) = rest.chars().next() else {
            return Ok(Value::Null);
        };
        match c {
            '|' | '>' => self.block_scalar(parent),
            '"' | '\'' => {
                let v = self.quoted(parent)?;
                self.end_of_node()?;
                Ok(v)
            }
            '[' | '{' => {
                let v = self.flow(parent)?;
                self.end_of_node()?;
                Ok(v)
            }
            '*' => {
                let name = prop_name(&rest[1..]);
                let v = match self.anchors.get(name) {
                    Some(v) => v.clone(),
                    None => {
                        return self.err(
                            line,
                            col,
                            format!(
                                "Unresolved alias (the anchor must be set before the alias): {name}"
                            ),
                        );
                    }
                };
                self.col += 1 + name.len();
                self.end_of_node()?;
                Ok(v)
            }
            '@' | '`' => self.err(
                line,
                col,
                format!("Plain value cannot start with reserved character {c}"),
            ),
            '%' => self.err(
                line,
                col,
                "Plain value cannot start with directive indicator character %",
            ),
            '#' => Ok(Value::Null),
            '?' if rest.len() == 1 || rest[1..].starts_with([' ', '\t']) => self.err(
                line,
                col,
                "Nested mappings are not allowed in compact mappings",
            ),
            _ => self.plain(parent),
        }
    }

    /// A plain scalar in block context, continued on following lines indented more than
    /// `parent`; a blank line folds to a newline, a line break to a space.
    fn plain(&mut self, parent: isize) -> Result<Value, YamlError> {
        let (line, col) = (self.line, self.col);
        let first = self.rest();
        let first = match comment_start(first) {
            Some(i) => &first[..i],
            None => first,
        };
        let first = first.trim_end_matches([' ', '\t']);
        if let Some(i) = plain_key_colon(first) {
            return self.err(
                line,
                col + i,
                "Nested mappings are not allowed in compact mappings",
            );
        }
        let mut text = first.to_string();
        let mut multi = false;
        self.col = self.cur().len();
        let mut i = self.line + 1;
        let mut breaks = 0usize;
        let mut ended_by_comment = comment_start(self.rest_from(line, col)).is_some();
        while i < self.lines.len() && !ended_by_comment {
            let l = self.lines[i];
            if is_blank(l) {
                breaks += 1;
                i += 1;
                continue;
            }
            let ind = indent_of(l);
            if (ind as isize) <= parent {
                break;
            }
            let content = l[ind..].trim_start_matches([' ', '\t']);
            if content.starts_with('#') {
                break;
            }
            if parent < 0 && ind == 0 && (l == "..." || l.starts_with("... ")) {
                break;
            }
            let (content, comment) = match comment_start(content) {
                Some(c) => (&content[..c], true),
                None => (content, false),
            };
            let content = content.trim_end_matches([' ', '\t']);
            if let Some(c) = plain_key_colon(content) {
                return self.err(
                    i,
                    ind + c,
                    "Nested mappings are not allowed in compact mappings",
                );
            }
            if breaks == 0 {
                text.push(' ');
            } else {
                text.extend(std::iter::repeat_n('\n', breaks));
            }
            text.push_str(content);
            multi = true;
            breaks = 0;
            self.line = i;
            self.col = l.len();
            ended_by_comment = comment;
            i += 1;
        }
        if multi {
            Ok(resolve_plain_folded(&text))
        } else {
            Ok(resolve_plain(&text))
        }
    }

    fn rest_from(&self, line: usize, col: usize) -> &'a str {
        self.lines
            .get(line)
            .and_then(|l| l.get(col..))
            .unwrap_or("")
    }

    /// A single- or double-quoted scalar starting at the current position; may span lines.
    fn quoted(&mut self, parent: isize) -> Result<Value, YamlError> {
        let _ = parent;
        let (sline, scol) = (self.line, self.col);
        let q = if self.rest().starts_with('"') {
            '"'
        } else {
            '\''
        };
        self.col += 1;
        let mut out = String::new();
        // Whitespace seen at the end of a line segment (dropped at a line break).
        let mut pending_ws = String::new();
        let mut first_line = true;
        loop {
            let l = self.cur();
            let seg = l.get(self.col..).unwrap_or("");
            let seg = if first_line {
                seg
            } else {
                seg.trim_start_matches([' ', '\t'])
            };
            let base = l.len() - seg.len();
            let mut chars = seg.char_indices().peekable();
            let mut escaped_break = false;
            while let Some((i, c)) = chars.next() {
                if c == q {
                    if q == '\'' && matches!(chars.peek(), Some((_, '\''))) {
                        out.push_str(&pending_ws);
                        pending_ws.clear();
                        out.push('\'');
                        chars.next();
                        continue;
                    }
                    out.push_str(&pending_ws);
                    self.col = base + i + 1;
                    return Ok(Value::String(out));
                }
                if q == '"' && c == '\\' {
                    out.push_str(&pending_ws);
                    pending_ws.clear();
                    let Some((j, e)) = chars.next() else {
                        escaped_break = true;
                        break;
                    };
                    match e {
                        '0' => out.push('\0'),
                        'a' => out.push('\u{7}'),
                        'b' => out.push('\u{8}'),
                        't' | '\t' => out.push('\t'),
                        'n' => out.push('\n'),
                        'v' => out.push('\u{b}'),
                        'f' => out.push('\u{c}'),
                        'r' => out.push('\r'),
                        'e' => out.push('\u{1b}'),
                        ' ' => out.push(' '),
                        '"' => out.push('"'),
                        '/' => out.push('/'),
                        '\\' => out.push('\\'),
                        'N' => out.push('\u{85}'),
                        '_' => out.push('\u{a0}'),
                        'L' => out.push('\u{2028}'),
                        'P' => out.push('\u{2029}'),
                        'x' | 'u' | 'U' => {
                            let n = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let hex = seg.get(j + 1..j + 1 + n).unwrap_or("");
                            let cp = (hex.len() == n)
                                .then(|| u32::from_str_radix(hex, 16).ok())
                                .flatten()
                                .and_then(char::from_u32);
                            match cp {
                                Some(ch) => out.push(ch),
                                None => {
                                    return self.err(
                                        self.line,
                                        base + i,
                                        format!("Invalid escape sequence \\{e}{hex}"),
                                    );
                                }
                            }
                            for _ in 0..n {
                                chars.next();
                            }
                        }
                        other => {
                            return self.err(
                                self.line,
                                base + i,
                                format!("Invalid escape sequence \\{other}"),
                            );
                        }
                    }
                    continue;
                }
                if c == ' ' || c == '\t' {
                    pending_ws.push(c);
                } else {
                    out.push_str(&pending_ws);
                    pending_ws.clear();
                    out.push(c);
                }
            }
            // End of line inside the quotes: fold the break.
            pending_ws.clear();
            first_line = false;
            let mut blank_lines = 0;
            self.line += 1;
            while self.line < self.lines.len() && is_blank(self.cur()) {
                blank_lines += 1;
                self.line += 1;
            }
            if self.line >= self.lines.len() {
                let what = if q == '"' { "\"" } else { "'" };
                return self.err(
                    sline,
                    scol + seg_len(self.lines.get(sline).copied().unwrap_or(""), scol),
                    format!("Missing closing {what}quote"),
                );
            }
            if !escaped_break {
                if blank_lines == 0 {
                    pending_ws.push(' ');
                } else {
                    out.extend(std::iter::repeat_n('\n', blank_lines));
                }
            } else if blank_lines > 0 {
                out.extend(std::iter::repeat_n('\n', blank_lines));
            }
            self.col = 0;
        }
    }

    /// A flow sequence or mapping starting at the current position; may span lines.
    fn flow(&mut self, parent: isize) -> Result<Value, YamlError> {
        self.enter()?;
        let r = self.flow_inner(parent);
        self.depth -= 1;
        r
    }

    fn flow_inner(&mut self, parent: isize) -> Result<Value, YamlError> {
        let (sline, scol) = (self.line, self.col);
        let open = if self.rest().starts_with('[') {
            '['
        } else {
            '{'
        };
        let close = if open == '[' { ']' } else { '}' };
        self.col += 1;
        let mut seq = Vec::new();
        let mut map = Map::new();
        loop {
            if !self.flow_ws() {
                let what = if open == '[' {
                    "Flow sequence in block collection must be sufficiently indented and end with a ]"
                } else {
                    "Flow map in block collection must be sufficiently indented and end with a }"
                };
                return self.err(sline, scol, what);
            }
            let rest = self.rest();
            if rest.starts_with(close) {
                self.col += 1;
                break;
            }
            if rest.starts_with(',') {
                return self.err(self.line, self.col, "Unexpected , in flow collection");
            }
            let (anchor, tag) = self.properties()?;
            let key = self.flow_scalar_or_collection(parent)?;
            let key = self.finish_properties(key, anchor, tag)?;
            if !self.flow_ws() {
                return self.err(sline, scol, format!("Missing closing {close}"));
            }
            let rest = self.rest();
            let is_pair = rest.starts_with(':')
                && (rest.len() == 1 || rest[1..].starts_with([' ', '\t', ',', ']', '}']));
            if is_pair {
                self.col += 1;
                if !self.flow_ws() {
                    return self.err(sline, scol, format!("Missing closing {close}"));
                }
                let rest = self.rest();
                let value = if rest.starts_with([',', close]) {
                    Value::Null
                } else {
                    let (anchor, tag) = self.properties()?;
                    let v = self.flow_scalar_or_collection(parent)?;
                    self.finish_properties(v, anchor, tag)?
                };
                if open == '{' {
                    let k = key_string(&key);
                    if map.contains_key(&k) {
                        return self.err(self.line, self.col, "Map keys must be unique");
                    }
                    map.insert(k, value);
                } else {
                    let mut m = Map::new();
                    m.insert(key_string(&key), value);
                    seq.push(Value::Object(m));
                }
            } else if open == '{' {
                let k = key_string(&key);
                if map.contains_key(&k) {
                    return self.err(self.line, self.col, "Map keys must be unique");
                }
                map.insert(k, Value::Null);
            } else {
                seq.push(key);
            }
            if !self.flow_ws() {
                return self.err(sline, scol, format!("Missing closing {close}"));
            }
            let rest = self.rest();
            if rest.starts_with(',') {
                self.col += 1;
            } else if !rest.starts_with(close) {
                return self.err(
                    self.line,
                    self.col,
                    format!("Missing , or {close} in flow collection"),
                );
            }
        }
        Ok(if open == '[' {
            Value::Array(seq)
        } else {
            Value::Object(map)
        })
    }

    /// Skip whitespace, comments and line breaks inside a flow collection; false at the end.
    fn flow_ws(&mut self) -> bool {
        loop {
            self.skip_inline_ws();
            let rest = self.rest();
            if !rest.is_empty() && !rest.starts_with('#') {
                return true;
            }
            self.line += 1;
            self.col = 0;
            if self.line >= self.lines.len() {
                return false;
            }
        }
    }

    fn flow_scalar_or_collection(&mut self, parent: isize) -> Result<Value, YamlError> {
        let rest = self.rest();
        if rest.starts_with(['[', '{']) {
            return self.flow(parent);
        }
        if rest.starts_with(['"', '\'']) {
            return self.quoted(parent);
        }
        if let Some(name) = rest.strip_prefix('*') {
            let name = prop_name(name);
            let v = self.anchors.get(name).cloned();
            return match v {
                Some(v) => {
                    self.col += 1 + name.len();
                    Ok(v)
                }
                None => self.err(
                    self.line,
                    self.col,
                    format!("Unresolved alias (the anchor must be set before the alias): {name}"),
                ),
            };
        }
        if rest.starts_with(['@', '`']) {
            return self.err(
                self.line,
                self.col,
                "Plain value cannot start with reserved character",
            );
        }
        // Plain scalar in flow context: up to , [ ] { } or ": " or " #", may continue on the
        // next lines (folded with a space).
        let mut text = String::new();
        loop {
            let rest = self.rest();
            let b = rest.as_bytes();
            let mut end = b.len();
            for i in 0..b.len() {
                let c = b[i];
                if matches!(c, b',' | b'[' | b']' | b'{' | b'}') {
                    end = i;
                    break;
                }
                if c == b':'
                    && (i + 1 == b.len() || matches!(b[i + 1], b' ' | b'\t' | b',' | b']' | b'}'))
                {
                    end = i;
                    break;
                }
                if c == b'#' && i > 0 && (b[i - 1] == b' ' || b[i - 1] == b'\t') {
                    end = i;
                    break;
                }
            }
            let part = rest[..end].trim_end_matches([' ', '\t']);
            if !part.is_empty() {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(part);
            }
            self.col += rest[..end].trim_end_matches([' ', '\t']).len();
            if end < b.len() {
                break;
            }
            // Line ended inside the scalar: continue on the next content line.
            let save = (self.line, self.col);
            if !self.flow_ws() {
                self.line = save.0;
                self.col = save.1;
                break;
            }
            let r = self.rest();
            if r.starts_with([',', ']', '}', ':', '#']) {
                break;
            }
        }
        Ok(resolve_plain(&text))
    }

    /// `|` or `>` with its header at the current position; content on the following lines.
    fn block_scalar(&mut self, parent: isize) -> Result<Value, YamlError> {
        let (hline, hcol) = (self.line, self.col);
        let rest = self.rest();
        let literal = rest.starts_with('|');
        let header_end = rest[1..]
            .find([' ', '\t'])
            .map(|i| i + 1)
            .unwrap_or(rest.len());
        let header = &rest[1..header_end];
        let mut chomp = 'c';
        let mut explicit: Option<usize> = None;
        let mut ok = header.len() <= 2;
        for ch in header.chars() {
            match ch {
                '+' | '-' if chomp == 'c' => chomp = ch,
                '1'..='9' if explicit.is_none() => explicit = Some(ch as usize - '0' as usize),
                _ => ok = false,
            }
        }
        if !ok {
            return self.err(
                hline,
                hcol + header_end,
                format!(
                    "Block scalar header includes extra characters: {}",
                    &rest[..header_end]
                ),
            );
        }
        let after = rest[header_end..].trim_start_matches([' ', '\t']);
        if !after.is_empty() && !after.starts_with('#') {
            return self.err(
                hline,
                hcol + header_end,
                "Unexpected content after a block scalar header",
            );
        }
        let base = parent.max(0) as usize;
        // Find the content indentation.
        let mut i = hline + 1;
        let content_indent = match explicit {
            Some(d) => base + d,
            None => {
                let mut j = i;
                let mut widest_blank = 0;
                while j < self.lines.len() && self.lines[j].bytes().all(|b| b == b' ') {
                    widest_blank = widest_blank.max(self.lines[j].len());
                    j += 1;
                }
                match self.lines.get(j) {
                    Some(l) if is_blank(l) => {
                        return self.err(
                            j,
                            0,
                            "Block scalar values in collections must be indented",
                        );
                    }
                    Some(l) if (indent_of(l) as isize) > parent => {
                        if widest_blank > indent_of(l) {
                            return self.err(
                                j,
                                0,
                                "Block scalars with more-indented leading empty lines must use an explicit indentation indicator",
                            );
                        }
                        indent_of(l)
                    }
                    _ => usize::MAX,
                }
            }
        };
        let mut body: Vec<&str> = Vec::new();
        while i < self.lines.len() {
            let l = self.lines[i];
            let blank = l.bytes().all(|b| b == b' ');
            if blank {
                // Before any content, a space-only line is empty however long it is.
                let seen_content = body.iter().any(|b| !b.is_empty());
                body.push(if seen_content {
                    l.get(content_indent..).unwrap_or("")
                } else {
                    ""
                });
                i += 1;
                continue;
            }
            if content_indent == usize::MAX || indent_of(l) < content_indent {
                if content_indent != usize::MAX && is_blank(l) {
                    return self.err(
                        i,
                        0,
                        "Block scalar lines must not be less indented than their first line",
                    );
                }
                break;
            }
            body.push(&l[content_indent..]);
            i += 1;
        }
        self.line = i.saturating_sub(1).max(hline);
        self.col = self.cur().len();
        // Trailing empty lines belong to the chomping. As pi's parser counts them: after
        // content, an unterminated last line adds no break; without content, an unterminated
        // last line counts only when indented past the parent.
        let runs_to_end = i == self.lines.len();
        let first_empty = body.len() - body.iter().rev().take_while(|l| l.is_empty()).count();
        let has_content = first_empty > 0;
        let mut trailing = body.len() - first_empty;
        if runs_to_end && !self.terminated && trailing > 0 {
            let last = self.lines[i - 1];
            if has_content || last.len() as isize <= parent {
                trailing -= 1;
            }
        }
        body.truncate(first_empty);
        let mut text = String::new();
        if literal {
            text = body.join("\n");
        } else {
            let mut prev_more = false;
            let mut started = false;
            let mut breaks = 0;
            for l in &body {
                if l.is_empty() {
                    breaks += 1;
                    continue;
                }
                let more = l.starts_with([' ', '\t']);
                if !started {
                    text.extend(std::iter::repeat_n('\n', breaks));
                    started = true;
                } else if breaks == 0 {
                    text.push(if more || prev_more { '\n' } else { ' ' });
                } else {
                    let n = if more || prev_more {
                        breaks + 1
                    } else {
                        breaks
                    };
                    text.extend(std::iter::repeat_n('\n', n));
                }
                text.push_str(l);
                prev_more = more;
                breaks = 0;
            }
        }
        match chomp {
            '-' => {}
            '+' => {
                if has_content {
                    text.push('\n');
                }
                text.extend(std::iter::repeat_n('\n', trailing));
            }
            _ => {
                if has_content {
                    text.push('\n');
                }
            }
        }
        Ok(Value::String(text))
    }
}

fn seg_len(l: &str, from: usize) -> usize {
    l.len().saturating_sub(from)
}

/// A `- ` sequence item indicator (or a lone `-`) at the start of `s`.
fn is_seq_item(s: &str) -> bool {
    s == "-" || s.starts_with("- ") || s.starts_with("-\t")
}

/// The name of an anchor, alias or tag: up to whitespace or a flow indicator.
fn prop_name(s: &str) -> &str {
    let end = s
        .find([' ', '\t', ',', '[', ']', '{', '}'])
        .unwrap_or(s.len());
    &s[..end]
}

/// Byte offset just past the closing quote of a quoted scalar that ends on this line.
fn quoted_end_on_line(s: &str) -> Option<usize> {
    let q = s.as_bytes()[0];
    let b = s.as_bytes();
    let mut i = 1;
    while i < b.len() {
        if q == b'"' && b[i] == b'\\' {
            i += 2;
            continue;
        }
        if b[i] == q {
            if q == b'\'' && i + 1 < b.len() && b[i + 1] == b'\'' {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// A mapping key as pi's JS object sees it: strings as they are, `null` as "", other scalars in
/// their JS string form, collections as JSON text.
fn key_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// Core-schema resolution of a multi-line plain scalar: only `null`-likes and numbers that
/// survive folding are typed; folded text with spaces is a string.
fn resolve_plain_folded(s: &str) -> Value {
    resolve_plain(s)
}

/// Core-schema resolution of a plain scalar.
pub fn resolve_plain(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => return Value::Null,
        _ => {}
    }
    if let Some(h) = s.strip_prefix("0x") {
        if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return number_from_u128(u128::from_str_radix(h, 16).ok(), h, 16);
        }
    }
    if let Some(o) = s.strip_prefix("0o") {
        if !o.is_empty() && o.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return number_from_u128(u128::from_str_radix(o, 8).ok(), o, 8);
        }
    }
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = s.parse::<i64>() {
            return Value::Number(i.into());
        }
        return float_value(s.parse::<f64>().unwrap_or(f64::NAN));
    }
    if is_core_float(s) {
        return float_value(s.parse::<f64>().unwrap_or(f64::NAN));
    }
    Value::String(s.to_string())
}

fn number_from_u128(v: Option<u128>, digits: &str, radix: u32) -> Value {
    match v.and_then(|v| i64::try_from(v).ok()) {
        Some(i) => Value::Number(i.into()),
        None => {
            let mut f = 0f64;
            for c in digits.chars() {
                f = f * radix as f64 + c.to_digit(radix).unwrap_or(0) as f64;
            }
            float_value(f)
        }
    }
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
fn is_core_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - f;
        if int_digits == 0 && frac_digits == 0 {
            return false;
        }
    } else if int_digits == 0 {
        return false;
    }
    let _ = frac_digits;
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let e = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == e {
            return false;
        }
    }
    i == b.len()
}

/// A JS number as JSON: integral values print without a fraction (as JSON.stringify does);
/// non-finite ones become `null` (as JSON.stringify does).
fn float_value(f: f64) -> Value {
    if !f.is_finite() {
        return Value::Null;
    }
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        return Value::Number((f as i64).into());
    }
    Number::from_f64(f)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(src: &str) -> Value {
        parse(src).unwrap_or_else(|e| panic!("{src:?}: {e}"))
    }

    fn bad(src: &str) -> String {
        match parse(src) {
            Ok(v) => panic!("{src:?} parsed as {v}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn scalars_and_maps() {
        assert_eq!(
            ok("name: my-skill\ndescription: Does things.\n"),
            json!({"name":"my-skill","description":"Does things."})
        );
        assert_eq!(
            ok("a: 1\nb: true\nc: ~\nd: 1.5\ne: 0x1F\nf: yes"),
            json!({"a":1,"b":true,"c":null,"d":1.5,"e":31,"f":"yes"})
        );
        assert_eq!(ok("d: foo # c\ne: foo#x"), json!({"d":"foo","e":"foo#x"}));
        assert_eq!(ok(""), Value::Null);
        assert_eq!(ok("# only\n\n"), Value::Null);
        assert_eq!(ok("just text"), json!("just text"));
    }

    #[test]
    fn multi_line_plain_and_quoted() {
        assert_eq!(
            ok("description: This is long\n  and continued\n\n  para\n"),
            json!({"description":"This is long and continued\npara"})
        );
        assert_eq!(ok("d: 'it''s\n  folded'"), json!({"d":"it's folded"}));
        assert_eq!(
            ok("d: \"a\\tb \\u00e9 \\x41\\\n   c\""),
            json!({"d":"a\tb é Ac"})
        );
    }

    #[test]
    fn block_scalars() {
        assert_eq!(ok("d: |\n  a\n  b\n"), json!({"d":"a\nb\n"}));
        assert_eq!(ok("d: |-\n  a\n\n"), json!({"d":"a"}));
        assert_eq!(ok("d: >\n  a\n  b\n\n  c\n"), json!({"d":"a b\nc\n"}));
        assert_eq!(
            ok("d: >\n  a\n    more\n  b\n"),
            json!({"d":"a\n  more\nb\n"})
        );
        assert_eq!(ok("d: |2\n    x\n  y\n"), json!({"d":"  x\ny\n"}));
        assert_eq!(ok("d: >\nn: 1"), json!({"d":"","n":1}));
        assert!(bad("d: |0\n  x").contains("Block scalar header"));
    }

    #[test]
    fn collections() {
        assert_eq!(
            ok("m:\n  a: 1\n  b:\n    c: x\nl:\n- a\n- b: 1\n  c: 2\nf: [a, [b], {c: d},]\n"),
            json!({"m":{"a":1,"b":{"c":"x"}},"l":["a",{"b":1,"c":2}],"f":["a",["b"],{"c":"d"}]})
        );
        assert_eq!(
            ok("a: &x v\nb: *x\nc: !!str 12"),
            json!({"a":"v","b":"v","c":"12"})
        );
    }

    #[test]
    fn errors_where_pi_errors() {
        for src in [
            "description: Use when: doing X",
            "name: a\nname: b",
            "name: a\n\tdescription: x",
            "d: @x",
            "d: `x`",
            "d: - x",
            "d: 'a' trailing",
            "d: 'open",
            "d: [open",
            "d: foo\nbar",
            "name: a\n  description: b",
            "d: \"\\q\"",
            "d: *nope",
            "m:\n  a: 1\n   b: 2",
            "d: foo\n  # c\n  bar",
        ] {
            bad(src);
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        let src = "a: ".to_string() + &"[".repeat(10_000);
        assert!(bad(&src).contains("too deep"));
    }
}
