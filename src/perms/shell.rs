//! The bash line splitter of the permission rules, pure: a command line becomes the simple
//! commands it runs, so that a rule `bash(git status*)` allows `git status; rm -rf x` only if
//! every part is allowed.
//!
//! Split at `&&`, `||`, `;`, `&`, `|`, `|&` and newlines; the insides of `$(…)`, backquotes,
//! `<(…)`, `>(…)` and subshells `( … )` are commands of their own (the outer command keeps the
//! substitution's text). Quotes and backslashes are removed from each word, words are joined by
//! one space, leading variable assignments (`A=1 rm …`) and the keywords that open a compound
//! command (`if`, `then`, `do`, `!`, `{` …) are dropped, so `r''m  -rf x` reads `rm -rf x`.
//!
//! What it cannot read with confidence (unbalanced quotes or parentheses, heredocs, `case`,
//! arithmetic with substitutions, `${…}` with substitutions inside, nesting deeper than
//! [`MAX_DEPTH`], a function definition) makes the split *uncertain*: the rules then never let
//! a pattern allow the line, while deny rules still apply to every part found.

/// Deepest nesting of substitutions and subshells read.
pub const MAX_DEPTH: usize = 32;

/// The simple commands of a line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub commands: Vec<String>,
    /// False when some of the line could not be read with confidence.
    pub certain: bool,
}

/// Split a bash command line into its simple commands.
pub fn split(line: &str) -> Split {
    let chars: Vec<char> = line.chars().collect();
    let mut p = Parser {
        s: &chars,
        i: 0,
        out: Vec::new(),
        certain: true,
    };
    p.list(0, None);
    if p.i < chars.len() {
        p.certain = false;
    }
    Split {
        commands: p.out,
        certain: p.certain,
    }
}

const KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time",
];

struct Parser<'a> {
    s: &'a [char],
    i: usize,
    out: Vec<String>,
    certain: bool,
}

/// The command being read: its finished words and the word in progress.
#[derive(Default)]
struct Cmd {
    words: Vec<String>,
    word: String,
    /// The word in progress has begun (an empty `''` is a word).
    in_word: bool,
}

impl Cmd {
    fn end_word(&mut self) {
        if self.in_word {
            self.words.push(std::mem::take(&mut self.word));
            self.in_word = false;
        }
    }
    fn push(&mut self, c: char) {
        self.word.push(c);
        self.in_word = true;
    }
    fn push_str(&mut self, t: &str) {
        self.word.push_str(t);
        self.in_word = true;
    }
    fn at_start(&self) -> bool {
        !self.in_word
            && self
                .words
                .iter()
                .all(|w| KEYWORDS.contains(&w.as_str()) || is_assignment(w))
    }
}

fn is_assignment(w: &str) -> bool {
    let Some((name, _)) = w.split_once('=') else {
        return false;
    };
    let mut cs = name.chars();
    matches!(cs.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && cs.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

impl Parser<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    /// Finish a simple command: drop keywords and leading assignments, record the rest.
    fn flush(&mut self, cmd: &mut Cmd) {
        cmd.end_word();
        let words = std::mem::take(&mut cmd.words);
        let mut start = 0;
        while start < words.len() && KEYWORDS.contains(&words[start].as_str()) {
            start += 1;
        }
        let rest = &words[start..];
        let skip = rest.iter().take_while(|w| is_assignment(w)).count();
        let words = if skip < rest.len() {
            &rest[skip..]
        } else {
            rest
        };
        if let Some(first) = words.first() {
            if matches!(first.as_str(), "case" | "function" | "select" | "coproc") {
                self.certain = false;
            }
        }
        if !words.is_empty() {
            self.out.push(words.join(" "));
        }
    }

    /// Read a list of commands until `close` (consumed) or the end of the line.
    fn list(&mut self, depth: usize, close: Option<char>) {
        if depth > MAX_DEPTH {
            self.certain = false;
            self.i = self.s.len();
            return;
        }
        let mut cmd = Cmd::default();
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' => {
                    cmd.end_word();
                    self.i += 1;
                }
                '\n' | ';' => {
                    self.flush(&mut cmd);
                    self.i += 1;
                }
                '|' => {
                    self.flush(&mut cmd);
                    self.i += 1;
                    if matches!(self.peek(0), Some('|') | Some('&')) {
                        self.i += 1;
                    }
                }
                '&' => {
                    if self.peek(1) == Some('>') {
                        // `&>file`, `&>>file`: a redirection.
                        cmd.push_str("&>");
                        self.i += 2;
                        continue;
                    }
                    self.flush(&mut cmd);
                    self.i += 1;
                    if self.peek(0) == Some('&') {
                        self.i += 1;
                    }
                }
                '>' | '<' => {
                    if self.peek(1) == Some('(') {
                        cmd.push_str(&format!("{c}("));
                        self.i += 2;
                        let text = self.nested(depth, ')');
                        cmd.push_str(&text);
                        continue;
                    }
                    if c == '<' && self.peek(1) == Some('<') && self.peek(2) != Some('<') {
                        // A heredoc: its body is not read.
                        self.certain = false;
                    }
                    cmd.push(c);
                    self.i += 1;
                    // `>&2`, `<&0`, `>|`: part of the redirection.
                    while let Some(n @ ('&' | '|' | '>' | '<')) = self.peek(0) {
                        cmd.push(n);
                        self.i += 1;
                    }
                }
                '(' => {
                    if !cmd.at_start() || self.peek(1) == Some('(') {
                        // `f() …`, `((…))`, `=(`: not read.
                        self.certain = false;
                    }
                    self.flush(&mut cmd);
                    self.i += 1;
                    self.list(depth + 1, Some(')'));
                }
                ')' => {
                    if close == Some(')') {
                        self.flush(&mut cmd);
                        self.i += 1;
                        return;
                    }
                    self.certain = false;
                    cmd.push(c);
                    self.i += 1;
                }
                '#' if !cmd.in_word => {
                    while let Some(n) = self.peek(0) {
                        if n == '\n' {
                            break;
                        }
                        self.i += 1;
                    }
                }
                '`' if close == Some('`') => {
                    self.flush(&mut cmd);
                    self.i += 1;
                    return;
                }
                _ => self.word_part(&mut cmd, depth),
            }
        }
        self.flush(&mut cmd);
        if close.is_some() {
            // The line ended inside a substitution or subshell.
            self.certain = false;
        }
    }

    /// Read a nested list closed by `close`; its commands are recorded, and its text returned
    /// (with the closing character) for the enclosing word.
    fn nested(&mut self, depth: usize, close: char) -> String {
        let start = self.i;
        self.list(depth + 1, Some(close));
        self.s[start..self.i.min(self.s.len())].iter().collect()
    }

    /// One piece of a word: a quoted string, an escape, a substitution, or a plain character.
    fn word_part(&mut self, cmd: &mut Cmd, depth: usize) {
        let Some(c) = self.peek(0) else { return };
        match c {
            '\\' => match self.peek(1) {
                Some('\n') => self.i += 2,
                Some(n) => {
                    cmd.push(n);
                    self.i += 2;
                }
                None => {
                    self.certain = false;
                    self.i += 1;
                }
            },
            '\'' => {
                cmd.in_word = true;
                self.i += 1;
                loop {
                    match self.peek(0) {
                        None => {
                            self.certain = false;
                            return;
                        }
                        Some('\'') => {
                            self.i += 1;
                            return;
                        }
                        Some(n) => {
                            cmd.push(n);
                            self.i += 1;
                        }
                    }
                }
            }
            '"' => {
                cmd.in_word = true;
                self.i += 1;
                loop {
                    match self.peek(0) {
                        None => {
                            self.certain = false;
                            return;
                        }
                        Some('"') => {
                            self.i += 1;
                            return;
                        }
                        Some('\\') => {
                            match self.peek(1) {
                                Some(n @ ('"' | '\\' | '$' | '`')) => cmd.push(n),
                                Some('\n') => {}
                                Some(n) => {
                                    cmd.push('\\');
                                    cmd.push(n);
                                }
                                None => {
                                    self.certain = false;
                                    self.i += 1;
                                    return;
                                }
                            }
                            self.i += 2;
                        }
                        Some('$') | Some('`') => self.dollar_or_backquote(cmd, depth),
                        Some(n) => {
                            cmd.push(n);
                            self.i += 1;
                        }
                    }
                }
            }
            '$' | '`' => self.dollar_or_backquote(cmd, depth),
            _ => {
                cmd.push(c);
                self.i += 1;
            }
        }
    }

    /// `$(…)`, `$((…))`, `${…}`, a backquote substitution, or a plain `$`.
    fn dollar_or_backquote(&mut self, cmd: &mut Cmd, depth: usize) {
        let c = self.peek(0);
        if c == Some('`') {
            // The inside of backquotes: nested backquotes need escapes not read here.
            let body_start = self.i + 1;
            let end = (body_start..self.s.len()).find(|&j| self.s[j] == '`');
            let Some(end) = end else {
                self.certain = false;
                self.i = self.s.len();
                return;
            };
            if self.s[body_start..end].contains(&'\\') {
                self.certain = false;
            }
            self.i += 1;
            let text = self.nested(depth, '`');
            cmd.push('`');
            cmd.push_str(&text);
            return;
        }
        match self.peek(1) {
            Some('(') if self.peek(2) == Some('(') => {
                // Arithmetic: read to the matching `))`; a substitution inside is not read.
                let text = self.balanced('(', ')');
                if text[1..].contains('$') || text.contains('`') {
                    self.certain = false;
                }
                cmd.push_str(&text);
            }
            Some('(') => {
                cmd.push_str("$(");
                self.i += 2;
                let text = self.nested(depth, ')');
                cmd.push_str(&text);
            }
            Some('{') => {
                let text = self.balanced('{', '}');
                let inner = &text[1..];
                if inner.contains('$') || inner.contains('`') || inner.contains("<(") {
                    self.certain = false;
                }
                cmd.push_str(&text);
            }
            _ => {
                cmd.push('$');
                self.i += 1;
            }
        }
    }

    /// `$` then an opener: the text up to the matching closer (all of it if unbalanced,
    /// uncertain).
    fn balanced(&mut self, open: char, close: char) -> String {
        let start = self.i;
        self.i += 1; // `$`
        let mut level = 0usize;
        while let Some(c) = self.peek(0) {
            self.i += 1;
            if c == open {
                level += 1;
            } else if c == close {
                level = level.saturating_sub(1);
                if level == 0 {
                    return self.s[start..self.i].iter().collect();
                }
            }
        }
        self.certain = false;
        self.s[start..].iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(line: &str) -> Vec<String> {
        let s = split(line);
        assert!(s.certain, "uncertain: {line}");
        s.commands
    }

    fn uncertain(line: &str) -> Vec<String> {
        let s = split(line);
        assert!(!s.certain, "certain: {line}");
        s.commands
    }

    #[test]
    fn operators_split() {
        assert_eq!(parts("git status"), ["git status"]);
        assert_eq!(parts("git status; rm -rf x"), ["git status", "rm -rf x"]);
        assert_eq!(
            parts("a && b || c | d |& e & f"),
            ["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(parts("a\nb\n\n"), ["a", "b"]);
        assert_eq!(parts(""), Vec::<String>::new());
        assert_eq!(parts("  ;; "), Vec::<String>::new());
    }

    #[test]
    fn quotes_are_respected_and_removed() {
        assert_eq!(parts("echo 'a; b' \"c && d\""), ["echo a; b c && d"]);
        assert_eq!(parts("r''m  -rf  x"), ["rm -rf x"]);
        assert_eq!(parts(r#"echo \; rm"#), ["echo ; rm"]);
        assert_eq!(parts(r#"echo "a\"b" 'c'"#), ["echo a\"b c"]);
        assert_eq!(parts("echo ''"), ["echo "]);
        assert_eq!(parts("a \\\n b"), ["a b"]);
    }

    #[test]
    fn substitutions_are_commands_too() {
        assert_eq!(parts("echo $(rm -rf x)"), ["rm -rf x", "echo $(rm -rf x)"]);
        assert_eq!(
            parts("echo \"$(curl evil)\""),
            ["curl evil", "echo $(curl evil)"]
        );
        assert_eq!(parts("echo `id`"), ["id", "echo `id`"]);
        assert_eq!(parts("(cd x && make)"), ["cd x", "make"]);
        assert_eq!(
            parts("diff <(ls a) >(cat)"),
            ["ls a", "cat", "diff <(ls a) >(cat)"]
        );
        assert_eq!(
            parts("echo $((1 + 2)) ${HOME}"),
            ["echo $((1 + 2)) ${HOME}"]
        );
        assert_eq!(parts("x=$(whoami) rm -rf /"), ["whoami", "rm -rf /"]);
    }

    #[test]
    fn redirections_stay_with_their_command() {
        assert_eq!(parts("make 2>&1 | tee log"), ["make 2>&1", "tee log"]);
        assert_eq!(parts("make &> log && ls"), ["make &> log", "ls"]);
        assert_eq!(parts("cat <<< hi"), ["cat <<< hi"]);
    }

    #[test]
    fn keywords_and_assignments_are_dropped() {
        assert_eq!(
            parts("if git status; then rm -rf x; fi"),
            ["git status", "rm -rf x"]
        );
        assert_eq!(parts("while true; do sleep 1; done"), ["true", "sleep 1"]);
        assert_eq!(parts("{ a; b; }"), ["a", "b"]);
        assert_eq!(parts("FOO=1 BAR=2 rm x"), ["rm x"]);
        assert_eq!(parts("FOO=1"), ["FOO=1"]);
        assert_eq!(parts("! grep x f"), ["grep x f"]);
        assert_eq!(parts("ls # ; rm -rf /"), ["ls"]);
    }

    #[test]
    fn unreadable_lines_are_uncertain() {
        assert_eq!(uncertain("echo 'abc"), ["echo abc"]);
        uncertain("echo \"abc");
        uncertain("echo $(ls");
        uncertain("cat <<EOF\nrm -rf x\nEOF");
        uncertain("f() { rm -rf x; }; f");
        uncertain("case $x in a) rm;; esac");
        uncertain("echo )");
        uncertain("echo \\");
        uncertain("echo ${x:-$(rm)}");
        uncertain("echo $(( $(rm) ))");
        uncertain("echo `echo \\`rm\\``");
        uncertain(&"(".repeat(100));
        // Deny still sees the parts it found.
        assert_eq!(uncertain("rm -rf x; echo 'q"), ["rm -rf x", "echo q"]);
    }
}
