//! A small syntax highlighter for code in the export: fenced code blocks in markdown, files read
//! and written by tools, bash commands, diffs.
//!
//! It is a single-pass lexer per language family (comments, strings, numbers, keywords, types,
//! calls, a few language quirks), not a parser: enough colour to read code, linear in the input,
//! with no backtracking. Every piece of input goes through [`escape_into`] on the way out, so its
//! output is safe HTML whatever the code contains. Classes (`hk` keyword, `hs` string, `hc`
//! comment, `hn` number, `ht` type, `hf` call, `hm` meta, `hv` variable, `hp` property, diff `da`
//! `dd` `dh` `dm`) are coloured by the page's stylesheet.

use super::html::escape_into;

/// How a language family is lexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Generic,
    Diff,
    Markup,
}

/// One language family.
#[derive(Debug, PartialEq, Eq)]
pub struct Lang {
    pub name: &'static str,
    kind: Kind,
    line_comments: &'static [&'static str],
    block_comments: &'static [(&'static str, &'static str)],
    /// Quote characters that open strings.
    quotes: &'static [u8],
    /// `"` and `'` strings may span lines (otherwise they end at the line's end).
    multiline_strings: bool,
    /// Python-style `"""` / `'''` strings.
    triple_quotes: bool,
    /// `'` opens a string only in the form `'x'` or `'\…'` (Rust lifetimes stay plain).
    char_literals: bool,
    /// Sorted keyword list.
    keywords: &'static [&'static str],
    /// Sorted builtin type / constant list.
    types: &'static [&'static str],
    /// Keywords match case-insensitively (SQL, Dockerfile).
    ci_keywords: bool,
    /// Capitalised identifiers are types.
    caps_types: bool,
    /// `$name` / `${…}` are variables.
    dollar_vars: bool,
    /// `@name` is an annotation / decorator.
    at_meta: bool,
    /// `#[…]` / `#!…` attributes (Rust).
    hash_attrs: bool,
    /// An identifier or string followed by `:` is a property (JSON keys, YAML, CSS).
    colon_props: bool,
    /// A 256-bit filter over (length, first byte, last byte) of every keyword and type, so most
    /// identifiers are known not to be one without searching the lists ([`filtered`]).
    filter: [u64; 4],
}

/// The filter bucket of a word (bytes lowercased for case-insensitive languages).
const fn bucket(len: usize, first: u8, last: u8) -> usize {
    (first.to_ascii_lowercase() as usize * 7 + last.to_ascii_lowercase() as usize * 13 + len * 31)
        & 255
}

/// `lang` with its keyword filter computed (at compile time).
const fn filtered(mut lang: Lang) -> Lang {
    let mut filter = [0u64; 4];
    let lists = [lang.keywords, lang.types];
    let mut l = 0;
    while l < 2 {
        let list = lists[l];
        let mut k = 0;
        while k < list.len() {
            let w = list[k].as_bytes();
            if !w.is_empty() {
                let b = bucket(w.len(), w[0], w[w.len() - 1]);
                filter[b / 64] |= 1 << (b % 64);
            }
            k += 1;
        }
        l += 1;
    }
    lang.filter = filter;
    lang
}

/// Case-insensitive ASCII ordering (the lists of case-insensitive languages are lowercase).
fn cmp_ci(a: &str, b: &str) -> std::cmp::Ordering {
    a.bytes()
        .map(|c| c.to_ascii_lowercase())
        .cmp(b.bytes().map(|c| c.to_ascii_lowercase()))
}

const fn generic(name: &'static str) -> Lang {
    Lang {
        name,
        kind: Kind::Generic,
        line_comments: &[],
        block_comments: &[],
        quotes: b"\"'",
        multiline_strings: false,
        triple_quotes: false,
        char_literals: false,
        keywords: &[],
        types: &[],
        ci_keywords: false,
        caps_types: false,
        dollar_vars: false,
        at_meta: false,
        hash_attrs: false,
        colon_props: false,
        filter: [0; 4],
    }
}

#[rustfmt::skip]
const RUST: Lang = filtered(Lang {
    line_comments: &["//"],
    block_comments: &[("/*", "*/")],
    quotes: b"\"'",
    multiline_strings: true,
    char_literals: true,
    keywords: &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
        "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait", "true",
        "type", "unsafe", "use", "where", "while",
    ],
    types: &[
        "Box", "None", "Ok", "Option", "Result", "Self", "Some", "String", "Vec", "bool", "char",
        "f32", "f64", "i128", "i16", "i32", "i64", "i8", "isize", "str", "u128", "u16", "u32",
        "u64", "u8", "usize",
    ],
    caps_types: true,
    hash_attrs: true,
    ..generic("rust")
});

#[rustfmt::skip]
const C_LIKE: Lang = filtered(Lang {
    line_comments: &["//"],
    block_comments: &[("/*", "*/")],
    quotes: b"\"'`",
    keywords: &[
        "abstract", "auto", "break", "case", "catch", "class", "const", "continue", "default",
        "defer", "delete", "do", "else", "enum", "extends", "extern", "false", "final", "finally",
        "for", "fun", "func", "go", "goto", "if", "implements", "import", "inline", "interface",
        "internal", "let", "namespace", "new", "nil", "null", "nullptr", "object", "operator",
        "override", "package", "private", "protected", "public", "range", "return", "select",
        "sizeof", "static", "struct", "super", "switch", "template", "this", "throw", "throws",
        "true", "try", "typedef", "typename", "union", "using", "val", "var", "virtual",
        "volatile", "when", "while",
    ],
    types: &[
        "Boolean", "Integer", "Object", "String", "bool", "boolean", "byte", "char", "double",
        "error", "float", "float64", "int", "int32", "int64", "long", "rune", "short", "size_t",
        "string", "uint", "uint32", "uint64", "uint8", "unsigned", "void",
    ],
    caps_types: true,
    at_meta: true,
    ..generic("c")
});

#[rustfmt::skip]
const JS: Lang = filtered(Lang {
    line_comments: &["//"],
    block_comments: &[("/*", "*/")],
    quotes: b"\"'`",
    keywords: &[
        "as", "async", "await", "break", "case", "catch", "class", "const", "continue",
        "debugger", "declare", "default", "delete", "do", "else", "enum", "export", "extends",
        "false", "finally", "for", "from", "function", "get", "if", "implements", "import", "in",
        "instanceof", "interface", "let", "new", "null", "of", "private", "protected", "public",
        "readonly", "return", "set", "static", "super", "switch", "this", "throw", "true", "try",
        "type", "typeof", "undefined", "var", "void", "while", "yield",
    ],
    types: &[
        "Array", "Map", "Number", "Object", "Promise", "Set", "String", "any", "boolean",
        "console", "never", "number", "string", "unknown",
    ],
    caps_types: true,
    at_meta: true,
    ..generic("javascript")
});

#[rustfmt::skip]
const PYTHON: Lang = filtered(Lang {
    line_comments: &["#"],
    triple_quotes: true,
    keywords: &[
        "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
        "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
        "if", "import", "in", "is", "lambda", "match", "nonlocal", "not", "or", "pass", "raise",
        "return", "self", "try", "while", "with", "yield",
    ],
    types: &[
        "bool", "bytes", "dict", "float", "int", "len", "list", "object", "print", "range", "set",
        "str", "tuple", "type",
    ],
    caps_types: true,
    at_meta: true,
    ..generic("python")
});

#[rustfmt::skip]
const RUBY: Lang = filtered(Lang {
    line_comments: &["#"],
    multiline_strings: true,
    keywords: &[
        "begin", "break", "case", "class", "def", "do", "else", "elsif", "end", "ensure", "false",
        "for", "if", "in", "module", "next", "nil", "not", "or", "require", "rescue", "return",
        "self", "super", "then", "true", "unless", "until", "when", "while", "yield",
    ],
    caps_types: true,
    ..generic("ruby")
});

#[rustfmt::skip]
const SHELL: Lang = filtered(Lang {
    line_comments: &["#"],
    quotes: b"\"'`",
    multiline_strings: true,
    keywords: &[
        "case", "cd", "do", "done", "echo", "elif", "else", "esac", "exit", "export", "fi", "for",
        "function", "if", "in", "local", "return", "set", "shift", "source", "then", "unset",
        "until", "while",
    ],
    dollar_vars: true,
    ..generic("shell")
});

#[rustfmt::skip]
const JSON: Lang = filtered(Lang {
    quotes: b"\"",
    keywords: &["false", "null", "true"],
    colon_props: true,
    ..generic("json")
});

#[rustfmt::skip]
const YAML: Lang = filtered(Lang {
    line_comments: &["#"],
    keywords: &["false", "no", "null", "off", "on", "true", "yes"],
    colon_props: true,
    ..generic("yaml")
});

#[rustfmt::skip]
const TOML: Lang = filtered(Lang {
    line_comments: &["#", ";"],
    keywords: &["false", "true"],
    ..generic("toml")
});

#[rustfmt::skip]
const CSS: Lang = filtered(Lang {
    line_comments: &[],
    block_comments: &[("/*", "*/")],
    keywords: &["and", "from", "not", "only", "to"],
    at_meta: true,
    colon_props: true,
    ..generic("css")
});

#[rustfmt::skip]
const SQL: Lang = filtered(Lang {
    line_comments: &["--"],
    block_comments: &[("/*", "*/")],
    keywords: &[
        "add", "all", "alter", "and", "as", "asc", "between", "by", "case", "create", "delete",
        "desc", "distinct", "drop", "else", "end", "exists", "from", "group", "having", "in",
        "index", "inner", "insert", "into", "is", "join", "key", "left", "like", "limit", "not",
        "null", "on", "or", "order", "outer", "primary", "references", "right", "select", "set",
        "table", "then", "union", "update", "values", "when", "where", "with",
    ],
    types: &[
        "bigint", "blob", "boolean", "char", "date", "int", "integer", "real", "text",
        "timestamp", "varchar",
    ],
    ci_keywords: true,
    ..generic("sql")
});

#[rustfmt::skip]
const LUA: Lang = filtered(Lang {
    line_comments: &["--"],
    keywords: &[
        "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "if", "in",
        "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    ],
    ..generic("lua")
});

#[rustfmt::skip]
const DOCKERFILE: Lang = filtered(Lang {
    line_comments: &["#"],
    keywords: &[
        "add", "arg", "cmd", "copy", "entrypoint", "env", "expose", "from", "healthcheck",
        "label", "onbuild", "run", "shell", "stopsignal", "user", "volume", "workdir",
    ],
    ci_keywords: true,
    dollar_vars: true,
    ..generic("dockerfile")
});

#[rustfmt::skip]
const DIFF: Lang = filtered(Lang {
    kind: Kind::Diff,
    ..generic("diff")
});

#[rustfmt::skip]
const MARKUP: Lang = filtered(Lang {
    kind: Kind::Markup,
    ..generic("html")
});

/// Shell (bash commands).
pub fn shell() -> &'static Lang {
    &SHELL
}

/// Unified diffs (and the edit tool's numbered diffs).
pub fn diff_lang() -> &'static Lang {
    &DIFF
}

/// JSON (tool arguments, unknown entries).
pub fn json() -> &'static Lang {
    &JSON
}

/// The language named by a fenced code block's info string (`rust`, `ts`, `console`, …).
pub fn lang_for_fence(info: &str) -> Option<&'static Lang> {
    let word = info
        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .unwrap_or("")
        .trim_start_matches('.')
        .to_ascii_lowercase();
    lang_by_name(&word)
}

fn lang_by_name(word: &str) -> Option<&'static Lang> {
    Some(match word {
        "rust" | "rs" => &RUST,
        "c" | "h" | "cpp" | "c++" | "cc" | "cxx" | "hpp" | "hh" | "objc" | "m" | "cs"
        | "csharp" | "java" | "kotlin" | "kt" | "kts" | "swift" | "scala" | "go" | "golang"
        | "dart" | "zig" | "groovy" | "gradle" | "php" | "proto" => &C_LIKE,
        "js" | "javascript" | "jsx" | "mjs" | "cjs" | "ts" | "typescript" | "tsx" | "mts"
        | "cts" => &JS,
        "python" | "py" | "pyi" | "python3" => &PYTHON,
        "ruby" | "rb" | "rake" | "gemspec" => &RUBY,
        "sh" | "bash" | "zsh" | "shell" | "console" | "shellsession" | "ksh" | "fish" | "env"
        | "makefile" | "make" | "mk" => &SHELL,
        "json" | "jsonc" | "jsonl" | "json5" | "ndjson" | "geojson" | "lock" => &JSON,
        "yaml" | "yml" => &YAML,
        "toml" | "ini" | "cfg" | "conf" | "properties" | "editorconfig" => &TOML,
        "html" | "htm" | "xml" | "svg" | "xhtml" | "vue" | "svelte" | "plist" | "xsd" | "xsl" => {
            &MARKUP
        }
        "css" | "scss" | "sass" | "less" => &CSS,
        "sql" | "psql" | "mysql" | "sqlite" => &SQL,
        "lua" => &LUA,
        "dockerfile" | "docker" | "containerfile" => &DOCKERFILE,
        "diff" | "patch" => &DIFF,
        _ => return None,
    })
}

/// The language of a file, from its name (`src/main.rs`, `Dockerfile`, `Makefile`).
pub fn lang_for_path(path: &str) -> Option<&'static Lang> {
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let lower = file.to_ascii_lowercase();
    match lower.as_str() {
        "dockerfile" | "containerfile" => return Some(&DOCKERFILE),
        "makefile" | "gnumakefile" => return Some(&SHELL),
        "cargo.lock" => return Some(&TOML),
        _ => {}
    }
    let (_, ext) = lower.rsplit_once('.')?;
    lang_by_name(ext)
}

/// Append `code` highlighted as `lang` (escaped; spans for tokens).
pub fn highlight_into(out: &mut String, code: &str, lang: &Lang) {
    match lang.kind {
        Kind::Generic => Lexer::new(code, lang, out).run(),
        Kind::Diff => diff(out, code),
        Kind::Markup => markup(out, code),
    }
}

fn span(out: &mut String, class: &str, text: &str) {
    if text.is_empty() {
        return;
    }
    out.push_str("<span class=\"");
    out.push_str(class);
    out.push_str("\">");
    escape_into(out, text);
    out.push_str("</span>");
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

struct Lexer<'a, 'o> {
    s: &'a str,
    b: &'a [u8],
    lang: &'a Lang,
    out: &'o mut String,
    /// Start of the pending run of plain text.
    plain: usize,
    i: usize,
}

impl<'a, 'o> Lexer<'a, 'o> {
    fn new(s: &'a str, lang: &'a Lang, out: &'o mut String) -> Self {
        Lexer {
            s,
            b: s.as_bytes(),
            lang,
            out,
            plain: 0,
            i: 0,
        }
    }

    /// Emit `[self.i, end)` with `class` (flushing plain text before it); only ever called
    /// with ASCII-aligned offsets, so slices stay on character boundaries.
    fn token(&mut self, end: usize, class: &str) {
        escape_into(self.out, &self.s[self.plain..self.i]);
        span(self.out, class, &self.s[self.i..end]);
        self.i = end;
        self.plain = end;
    }

    fn line_end(&self, from: usize) -> usize {
        self.b[from..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(self.b.len(), |p| from + p)
    }

    fn find(&self, from: usize, pat: &str) -> Option<usize> {
        self.s.get(from..)?.find(pat).map(|p| from + p)
    }

    fn run(mut self) {
        let n = self.b.len();
        while self.i < n {
            let c = self.b[self.i];
            if c == b' ' || c == b'\n' || c == b'\t' {
                self.i += 1;
                continue;
            }
            let rest = &self.s[self.i..];
            let word_start = self.i == 0 || !is_ident(self.b[self.i - 1]);
            let starts = |p: &str| p.as_bytes()[0] == c && rest.starts_with(p);
            if let Some(lc) = self.lang.line_comments.iter().find(|p| starts(p)) {
                // `#` in the middle of a shell word (`a#b`, `$#`) is not a comment.
                if !(lc == &"#" && self.lang.dollar_vars && !word_start) {
                    let end = self.line_end(self.i);
                    self.token(end, "hc");
                    continue;
                }
            }
            if let Some((open, close)) = self.lang.block_comments.iter().find(|(o, _)| starts(o)) {
                let end = self
                    .find(self.i + open.len(), close)
                    .map_or(n, |p| p + close.len());
                self.token(end, "hc");
                continue;
            }
            if self.lang.quotes.contains(&c) {
                if let Some(end) = self.string_end(c) {
                    let class = if self.lang.colon_props && self.followed_by_colon(end) {
                        "hp"
                    } else {
                        "hs"
                    };
                    self.token(end, class);
                    continue;
                }
            }
            if c.is_ascii_digit() && word_start {
                let mut end = self.i + 1;
                while end < n && (is_ident(self.b[end]) || self.b[end] == b'.') {
                    // `1..10`: a range, not a decimal point.
                    if self.b[end] == b'.' && self.b.get(end + 1) == Some(&b'.') {
                        break;
                    }
                    end += 1;
                }
                self.token(end, "hn");
                continue;
            }
            if is_ident_start(c) && word_start {
                let mut end = self.i + 1;
                while end < n && is_ident(self.b[end]) {
                    end += 1;
                }
                let word = &self.s[self.i..end];
                let class = self.word_class(word, end);
                match class {
                    Some(cl) => self.token(end, cl),
                    None => self.i = end,
                }
                continue;
            }
            if c == b'$' && self.lang.dollar_vars {
                let end = self.dollar_end();
                if end > self.i + 1 {
                    self.token(end, "hv");
                    continue;
                }
            }
            if c == b'@' && self.lang.at_meta {
                let mut end = self.i + 1;
                while end < n
                    && (is_ident(self.b[end]) || self.b[end] == b'.' || self.b[end] == b'-')
                {
                    end += 1;
                }
                if end > self.i + 1 {
                    self.token(end, "hm");
                    continue;
                }
            }
            if c == b'#'
                && self.lang.hash_attrs
                && (rest.starts_with("#[") || rest.starts_with("#!["))
            {
                let line_end = self.line_end(self.i);
                let end = self.s[self.i..line_end]
                    .find(']')
                    .map_or(line_end, |p| self.i + p + 1);
                self.token(end, "hm");
                continue;
            }
            self.i += 1;
            // Skip the rest of a multi-byte character at once.
            while self.i < n && !self.s.is_char_boundary(self.i) {
                self.i += 1;
            }
        }
        escape_into(self.out, &self.s[self.plain..]);
    }

    /// Where the string opened by `q` at `self.i` ends (exclusive), or `None` when this quote
    /// does not open one (a Rust lifetime).
    fn string_end(&self, q: u8) -> Option<usize> {
        let n = self.b.len();
        let i = self.i;
        if self.lang.triple_quotes && self.b[i..].starts_with(&[q, q, q]) {
            let close = [q, q, q];
            let close = std::str::from_utf8(&close).unwrap_or("\"\"\"");
            return Some(self.find(i + 3, close).map_or(n, |p| p + 3));
        }
        if q == b'\'' && self.lang.char_literals {
            let next = *self.b.get(i + 1)?;
            let is_char = if next == b'\\' {
                true
            } else {
                // 'x' where x is one character.
                let ch_len = self.s[i + 1..].chars().next().map_or(1, char::len_utf8);
                self.b.get(i + 1 + ch_len) == Some(&b'\'')
            };
            if !is_char {
                return None;
            }
        }
        let multiline = self.lang.multiline_strings || q == b'`';
        let mut j = i + 1;
        while j < n {
            match self.b[j] {
                b'\\' => j += 2,
                b'\n' if !multiline => return Some(j),
                c if c == q => return Some(j + 1),
                _ => j += 1,
            }
        }
        Some(n)
    }

    fn followed_by_colon(&self, from: usize) -> bool {
        self.b[from.min(self.b.len())..]
            .iter()
            .find(|c| **c != b' ' && **c != b'\t')
            .is_some_and(|c| *c == b':')
    }

    fn word_class(&self, word: &str, end: usize) -> Option<&'static str> {
        let w = word.as_bytes();
        let b = bucket(w.len(), w[0], w[w.len() - 1]);
        if self.lang.filter[b / 64] & (1 << (b % 64)) != 0 {
            let hit = |list: &[&str]| {
                if self.lang.ci_keywords {
                    list.binary_search_by(|k| cmp_ci(k, word)).is_ok()
                } else {
                    list.binary_search(&word).is_ok()
                }
            };
            if hit(self.lang.keywords) {
                return Some("hk");
            }
            if hit(self.lang.types) {
                return Some("ht");
            }
        }
        if self.lang.colon_props && self.followed_by_colon(end) {
            return Some("hp");
        }
        let next = self.b.get(end).copied();
        if next == Some(b'(') || (next == Some(b'!') && self.lang.hash_attrs) {
            return Some("hf");
        }
        if self.lang.caps_types && word.as_bytes()[0].is_ascii_uppercase() && word.len() > 1 {
            return Some("ht");
        }
        None
    }

    fn dollar_end(&self) -> usize {
        let n = self.b.len();
        let i = self.i + 1;
        match self.b.get(i) {
            Some(b'{') => self.find(i, "}").map_or(n, |p| p + 1),
            Some(c) if is_ident(*c) => {
                let mut end = i;
                while end < n && is_ident(self.b[end]) {
                    end += 1;
                }
                end
            }
            Some(b'?' | b'#' | b'@' | b'*' | b'!' | b'$') => i + 1,
            _ => i,
        }
    }
}

fn diff(out: &mut String, code: &str) {
    for line in code.split_inclusive('\n') {
        let class = if line.starts_with("+++") || line.starts_with("---") {
            "dm"
        } else if line.starts_with('+') {
            "da"
        } else if line.starts_with('-') {
            "dd"
        } else if line.starts_with("@@") {
            "dh"
        } else if line.starts_with("diff ") || line.starts_with("index ") {
            "dm"
        } else {
            ""
        };
        if class.is_empty() {
            escape_into(out, line);
        } else {
            // The newline stays outside the span: the span is a full-width band.
            let (text, nl) = match line.strip_suffix('\n') {
                Some(t) => (t, "\n"),
                None => (line, ""),
            };
            span(out, class, text);
            out.push_str(nl);
        }
    }
}

/// HTML/XML: tags, attribute names, attribute values, comments, doctype; text in between plain.
fn markup(out: &mut String, code: &str) {
    let b = code.as_bytes();
    let n = b.len();
    let mut i = 0;
    let mut plain = 0;
    let flush = |out: &mut String, from: usize, to: usize| escape_into(out, &code[from..to]);
    while i < n {
        if b[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        if rest.starts_with("<!--") {
            flush(out, plain, i);
            let end = rest.find("-->").map_or(n, |p| i + p + 3);
            span(out, "hc", &code[i..end]);
            i = end;
            plain = i;
            continue;
        }
        let name_start = i + 1 + usize::from(b.get(i + 1) == Some(&b'/'));
        let is_tag = b
            .get(name_start)
            .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'!' || *c == b'?');
        if !is_tag {
            i += 1;
            continue;
        }
        flush(out, plain, i);
        let mut j = name_start;
        while j < n && (b[j].is_ascii_alphanumeric() || b"-_:.!?".contains(&b[j])) {
            j += 1;
        }
        span(out, "hk", &code[i..j]);
        // Attributes until `>`.
        let mut k = j;
        let mut seg = j;
        while k < n && b[k] != b'>' && b[k] != b'<' {
            if b[k] == b'"' || b[k] == b'\'' {
                escape_into(out, &code[seg..k]);
                let q = b[k];
                let end = code[k + 1..].find(q as char).map_or(n, |p| k + 1 + p + 1);
                span(out, "hs", &code[k..end]);
                k = end;
                seg = k;
                continue;
            }
            if b[k].is_ascii_alphabetic()
                && (b[k - 1] == b' ' || b[k - 1] == b'\n' || b[k - 1] == b'\t')
            {
                escape_into(out, &code[seg..k]);
                let mut e = k;
                while e < n && (b[e].is_ascii_alphanumeric() || b"-_:.@".contains(&b[e])) {
                    e += 1;
                }
                span(out, "hm", &code[k..e]);
                k = e;
                seg = k;
                continue;
            }
            k += 1;
            while k < n && !code.is_char_boundary(k) {
                k += 1;
            }
        }
        escape_into(out, &code[seg..k]);
        if k < n && b[k] == b'>' {
            span(out, "hk", ">");
            k += 1;
        }
        i = k;
        plain = k;
    }
    flush(out, plain, n);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hl(code: &str, lang: &str) -> String {
        let mut out = String::new();
        highlight_into(&mut out, code, lang_for_fence(lang).unwrap());
        out
    }

    /// The text a browser shows: tags removed, entities decoded.
    fn text_of(html: &str) -> String {
        let mut out = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                _ if !in_tag => out.push(c),
                _ => {}
            }
        }
        out.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    #[test]
    fn keyword_lists_are_sorted() {
        for l in [
            &RUST,
            &C_LIKE,
            &JS,
            &PYTHON,
            &RUBY,
            &SHELL,
            &JSON,
            &YAML,
            &TOML,
            &CSS,
            &SQL,
            &LUA,
            &DOCKERFILE,
        ] {
            for list in [l.keywords, l.types] {
                let mut sorted = list.to_vec();
                sorted.sort_unstable();
                assert_eq!(sorted, list, "{}", l.name);
            }
        }
    }

    #[test]
    fn filters_admit_every_listed_word() {
        for l in [
            &RUST,
            &C_LIKE,
            &JS,
            &PYTHON,
            &RUBY,
            &SHELL,
            &JSON,
            &YAML,
            &TOML,
            &CSS,
            &SQL,
            &LUA,
            &DOCKERFILE,
        ] {
            for w in l.keywords.iter().chain(l.types) {
                let mut out = String::new();
                let code = if l.ci_keywords {
                    w.to_ascii_uppercase()
                } else {
                    w.to_string()
                };
                // A word followed by a space, so it is not taken for a call or a property.
                highlight_into(&mut out, &format!("{code} "), l);
                assert!(out.starts_with("<span class=\"h"), "{}: {w}: {out}", l.name);
            }
        }
    }

    #[test]
    fn rust_tokens() {
        let h = hl(
            "#[derive(Debug)]\nfn main() -> Xy<'a> { let s = \"x<y\"; // done\n let c = 'c'; 42 }",
            "rust",
        );
        assert!(
            h.contains("<span class=\"hm\">#[derive(Debug)]</span>"),
            "{h}"
        );
        assert!(h.contains("<span class=\"hk\">fn</span>"));
        assert!(h.contains("<span class=\"hf\">main</span>"));
        assert!(h.contains("<span class=\"hs\">&quot;x&lt;y&quot;</span>"));
        assert!(h.contains("<span class=\"hc\">// done</span>"));
        assert!(h.contains("<span class=\"hs\">&#39;c&#39;</span>"));
        assert!(h.contains("<span class=\"hn\">42</span>"));
        // The lifetime stays plain.
        assert!(h.contains("Xy</span>&lt;&#39;a&gt;"), "{h}");
    }

    #[test]
    fn text_is_preserved_exactly() {
        let samples = [
            ("fn x() { \"unterminated", "rust"),
            ("/* never closed", "js"),
            ("<div class=\"a\" onclick='x()'>t</div><!-- c -->", "html"),
            ("echo \"$HOME\" ${x:-y} $# a#b # c", "bash"),
            ("SELECT * FROM t -- x\nWHERE a = 'b'", "sql"),
            ("{\"k\": [1, 2.5, true, null, \"v\"]}", "json"),
            (
                "def f():\n    \"\"\"doc\n    more\"\"\"\n    return 'x'",
                "python",
            ),
            ("-a\n+b\n@@ -1 +1 @@\n c", "diff"),
            ("é ü 日本 'ß' \"ñ\" // 🚀", "rust"),
            ("</script><script>alert(1)</script>", "js"),
        ];
        for (code, lang) in samples {
            let h = hl(code, lang);
            assert_eq!(text_of(&h), code, "{lang}: {h}");
            assert!(!h.contains("<script"), "{h}");
        }
    }

    #[test]
    fn shell_and_json_specifics() {
        let h = hl("echo $HOME # note", "sh");
        assert!(h.contains("<span class=\"hv\">$HOME</span>"));
        assert!(h.contains("<span class=\"hc\"># note</span>"));
        let h = hl("{\"key\": \"value\"}", "json");
        assert!(h.contains("<span class=\"hp\">&quot;key&quot;</span>"));
        assert!(h.contains("<span class=\"hs\">&quot;value&quot;</span>"));
        let h = hl("select x from t", "sql");
        assert!(h.contains("<span class=\"hk\">select</span>"));
    }

    #[test]
    fn languages_from_paths() {
        assert_eq!(lang_for_path("src/main.rs").map(|l| l.name), Some("rust"));
        assert_eq!(
            lang_for_path("/a/b/Dockerfile").map(|l| l.name),
            Some("dockerfile")
        );
        assert_eq!(
            lang_for_path("web/app.tsx").map(|l| l.name),
            Some("javascript")
        );
        assert_eq!(lang_for_path("README"), None);
        assert_eq!(lang_for_fence("rust,ignore").map(|l| l.name), Some("rust"));
        assert_eq!(lang_for_fence("").map(|l| l.name), None);
    }

    #[test]
    fn diff_lines() {
        let h = hl("-old\n+new\n ctx", "diff");
        assert_eq!(
            h,
            "<span class=\"dd\">-old</span>\n<span class=\"da\">+new</span>\n ctx"
        );
    }
}
