//! A small regular-expression engine for the `grep` tool (no regex crate is allowed).
//!
//! Supports what models put in search patterns: literals, `.`, classes `[a-z]`/`[^...]`,
//! `\d \w \s \D \W \S`, `\b \B`, anchors `^ $`, groups `( )`/`(?: )`/`(?P<n> )`, alternation `|`,
//! and the quantifiers `* + ? {n} {n,} {n,m}` (lazy forms accepted; only "does the line match"
//! matters). Matching is a Pike VM: time linear in line length times program size, no
//! backtracking blow-ups. Lines are matched one at a time, so `^`/`$` are line anchors.

#[derive(Clone, Debug)]
enum Node {
    Char(char),
    Any,
    Class(Vec<(char, char)>, bool),
    Start,
    End,
    WordB(bool),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat(Box<Node>, u32, Option<u32>),
    Empty,
}

#[derive(Clone, Debug)]
enum Inst {
    Char(char),
    Any,
    Class(Vec<(char, char)>, bool),
    Start,
    End,
    WordB(bool),
    Split(usize, usize),
    Jmp(usize),
    Match,
}

/// A compiled pattern.
#[derive(Clone, Debug)]
pub struct Regex {
    prog: Vec<Inst>,
    ignore_case: bool,
}

const MAX_REPEAT: u32 = 1000;
const MAX_PROG: usize = 200_000;

impl Regex {
    pub fn new(pattern: &str, ignore_case: bool) -> Result<Regex, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut p = Parser { c: &chars, i: 0 };
        let node = p.alt()?;
        if p.i < chars.len() {
            return Err("unopened group".to_string());
        }
        let mut prog = Vec::new();
        compile(&node, &mut prog)?;
        prog.push(Inst::Match);
        Ok(Regex { prog, ignore_case })
    }

    /// Whether the pattern matches anywhere in `line`.
    pub fn is_match(&self, line: &str) -> bool {
        let text: Vec<char> = if self.ignore_case {
            line.chars().map(fold).collect()
        } else {
            line.chars().collect()
        };
        let n = self.prog.len();
        let mut clist = Threads::new(n);
        let mut nlist = Threads::new(n);
        for pos in 0..=text.len() {
            self.add(&mut clist, 0, pos, &text);
            if clist.has_match {
                return true;
            }
            if pos == text.len() {
                break;
            }
            let c = text[pos];
            nlist.clear();
            for k in 0..clist.dense.len() {
                let pc = clist.dense[k];
                let advance = match &self.prog[pc] {
                    Inst::Char(x) => self.eq(*x, c),
                    Inst::Any => c != '\n',
                    Inst::Class(items, neg) => self.in_class(items, c) != *neg,
                    _ => false,
                };
                if advance {
                    self.add(&mut nlist, pc + 1, pos + 1, &text);
                }
            }
            if nlist.has_match {
                return true;
            }
            std::mem::swap(&mut clist, &mut nlist);
        }
        false
    }

    fn eq(&self, pat: char, c: char) -> bool {
        if self.ignore_case {
            fold(pat) == c
        } else {
            pat == c
        }
    }

    fn in_class(&self, items: &[(char, char)], c: char) -> bool {
        let hit = |x: char| items.iter().any(|(a, b)| *a <= x && x <= *b);
        if self.ignore_case {
            hit(c) || c.to_uppercase().any(hit) || c.to_lowercase().any(hit)
        } else {
            hit(c)
        }
    }

    /// Add `pc` and its epsilon closure at text position `pos` (explicit stack, no recursion).
    fn add(&self, list: &mut Threads, pc: usize, pos: usize, text: &[char]) {
        let mut stack = vec![pc];
        while let Some(pc) = stack.pop() {
            if !list.insert(pc) {
                continue;
            }
            match &self.prog[pc] {
                Inst::Jmp(a) => stack.push(*a),
                Inst::Split(a, b) => {
                    stack.push(*b);
                    stack.push(*a);
                }
                Inst::Start => {
                    if pos == 0 {
                        stack.push(pc + 1);
                    }
                }
                Inst::End => {
                    if pos == text.len() {
                        stack.push(pc + 1);
                    }
                }
                Inst::WordB(want) => {
                    let before = pos > 0 && is_word(text[pos - 1]);
                    let after = pos < text.len() && is_word(text[pos]);
                    if (before != after) == *want {
                        stack.push(pc + 1);
                    }
                }
                Inst::Match => list.has_match = true,
                _ => list.dense.push(pc),
            }
        }
    }
}

fn fold(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A sparse set of program counters (consuming instructions are kept in `dense`).
struct Threads {
    seen: Vec<u32>,
    generation: u32,
    dense: Vec<usize>,
    has_match: bool,
}

impl Threads {
    fn new(n: usize) -> Threads {
        Threads {
            seen: vec![0; n],
            generation: 1,
            dense: Vec::new(),
            has_match: false,
        }
    }
    fn clear(&mut self) {
        self.generation += 1;
        self.dense.clear();
        self.has_match = false;
    }
    fn insert(&mut self, pc: usize) -> bool {
        if self.seen[pc] == self.generation {
            return false;
        }
        self.seen[pc] = self.generation;
        true
    }
}

struct Parser<'a> {
    c: &'a [char],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.c.get(self.i).copied()
    }

    fn alt(&mut self) -> Result<Node, String> {
        let mut branches = vec![self.concat()?];
        while self.peek() == Some('|') {
            self.i += 1;
            branches.push(self.concat()?);
        }
        Ok(if branches.len() == 1 {
            branches.pop().unwrap_or(Node::Empty)
        } else {
            Node::Alt(branches)
        })
    }

    fn concat(&mut self) -> Result<Node, String> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            items.push(self.quantifiers(atom)?);
        }
        Ok(Node::Concat(items))
    }

    fn quantifiers(&mut self, mut node: Node) -> Result<Node, String> {
        loop {
            let (min, max) = match self.peek() {
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('?') => (0, Some(1)),
                Some('{') => match self.counted()? {
                    Some(r) => r,
                    None => return Ok(node),
                },
                _ => return Ok(node),
            };
            self.i += 1; // past the operator (or the closing brace of a count)
            if matches!(self.peek(), Some('?' | '+')) {
                self.i += 1; // lazy / possessive: same answer for "does it match"
            }
            if matches!(node, Node::Start | Node::End | Node::WordB(_)) {
                continue;
            }
            node = Node::Repeat(Box::new(node), min, max);
        }
    }

    /// `{n}`, `{n,}`, `{n,m}`; leaves `i` on the closing brace. `None`: a literal `{`.
    fn counted(&mut self) -> Result<Option<(u32, Option<u32>)>, String> {
        let rest: String = self.c[self.i..].iter().collect();
        let Some(close) = rest.find('}') else {
            return Ok(None);
        };
        let body = &rest[1..close];
        let parse = |s: &str| s.trim().parse::<u32>().ok();
        let range = match body.split_once(',') {
            None => parse(body).map(|n| (n, Some(n))),
            Some((a, "")) => parse(a).map(|n| (n, None)),
            Some((a, b)) => match (parse(a), parse(b)) {
                (Some(a), Some(b)) if a <= b => Some((a, Some(b))),
                (Some(_), Some(_)) => return Err("invalid repetition range".to_string()),
                _ => None,
            },
        };
        let Some((min, max)) = range else {
            return Ok(None);
        };
        if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT) {
            return Err("repetition count too large".to_string());
        }
        self.i += body.chars().count() + 1; // now on '}'
        Ok(Some((min, max)))
    }

    fn atom(&mut self) -> Result<Node, String> {
        let c = self.peek().ok_or("unexpected end")?;
        self.i += 1;
        Ok(match c {
            '.' => Node::Any,
            '^' => Node::Start,
            '$' => Node::End,
            '(' => {
                if self.peek() == Some('?') {
                    self.i += 1;
                    match self.peek() {
                        Some(':') => self.i += 1,
                        Some('P' | '<') => {
                            while let Some(c) = self.peek() {
                                self.i += 1;
                                if c == '>' {
                                    break;
                                }
                            }
                        }
                        _ => return Err("unsupported group flag".to_string()),
                    }
                }
                let inner = self.alt()?;
                if self.peek() != Some(')') {
                    return Err("unclosed group".to_string());
                }
                self.i += 1;
                inner
            }
            '[' => self.class()?,
            '\\' => self.escape(false)?,
            '*' | '+' | '?' => return Err("repetition operator missing expression".to_string()),
            c => Node::Char(c),
        })
    }

    fn escape(&mut self, in_class: bool) -> Result<Node, String> {
        let c = self.peek().ok_or("incomplete escape sequence")?;
        self.i += 1;
        let digit = vec![('0', '9')];
        let word = vec![('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')];
        let space = vec![('\t', '\r'), (' ', ' ')];
        Ok(match c {
            'd' => Node::Class(digit, false),
            'D' => Node::Class(digit, true),
            'w' => Node::Class(word, false),
            'W' => Node::Class(word, true),
            's' => Node::Class(space, false),
            'S' => Node::Class(space, true),
            'b' if !in_class => Node::WordB(true),
            'B' if !in_class => Node::WordB(false),
            'A' if !in_class => Node::Start,
            'z' if !in_class => Node::End,
            'n' => Node::Char('\n'),
            't' => Node::Char('\t'),
            'r' => Node::Char('\r'),
            'f' => Node::Char('\u{c}'),
            'v' => Node::Char('\u{b}'),
            'x' => {
                let hex: String = if self.peek() == Some('{') {
                    let s: String = self.c[self.i + 1..]
                        .iter()
                        .take_while(|c| **c != '}')
                        .collect();
                    self.i += s.chars().count() + 2;
                    s
                } else {
                    let s: String = self.c[self.i..].iter().take(2).collect();
                    self.i += s.chars().count();
                    s
                };
                let v = u32::from_str_radix(&hex, 16).map_err(|_| "invalid hex escape")?;
                Node::Char(char::from_u32(v).ok_or("invalid hex escape")?)
            }
            c if c.is_ascii_alphanumeric() => {
                return Err(format!("unrecognized escape sequence \\{c}"));
            }
            c => Node::Char(c),
        })
    }

    fn class(&mut self) -> Result<Node, String> {
        let negated = self.peek() == Some('^');
        if negated {
            self.i += 1;
        }
        let mut items = Vec::new();
        let mut negated_parts = Vec::new();
        let mut first = true;
        loop {
            let c = self.peek().ok_or("unclosed character class")?;
            if c == ']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            self.i += 1;
            let lo = if c == '\\' {
                match self.escape(true)? {
                    Node::Char(x) => x,
                    Node::Class(set, false) => {
                        items.extend(set);
                        continue;
                    }
                    Node::Class(set, true) => {
                        negated_parts.push(set);
                        continue;
                    }
                    _ => continue,
                }
            } else if c == '[' && self.peek() == Some(':') {
                let name: String = self.c[self.i + 1..]
                    .iter()
                    .take_while(|c| **c != ':')
                    .collect();
                self.i += name.chars().count() + 3; // ":name:]"
                items.extend(posix_class(&name).ok_or("invalid POSIX class")?);
                continue;
            } else {
                c
            };
            if self.peek() == Some('-') && self.c.get(self.i + 1).is_some_and(|c| *c != ']') {
                self.i += 1;
                let hc = self.peek().ok_or("unclosed character class")?;
                self.i += 1;
                let hi = if hc == '\\' {
                    match self.escape(true)? {
                        Node::Char(x) => x,
                        _ => return Err("invalid range".to_string()),
                    }
                } else {
                    hc
                };
                if hi < lo {
                    return Err("invalid character class range".to_string());
                }
                items.push((lo, hi));
            } else {
                items.push((lo, lo));
            }
        }
        // A negated escape inside a class (`[\D]`) becomes the complement ranges.
        for set in negated_parts {
            items.extend(complement(&set));
        }
        Ok(Node::Class(items, negated))
    }
}

fn posix_class(name: &str) -> Option<Vec<(char, char)>> {
    Some(match name {
        "alpha" => vec![('A', 'Z'), ('a', 'z')],
        "digit" => vec![('0', '9')],
        "alnum" => vec![('0', '9'), ('A', 'Z'), ('a', 'z')],
        "space" => vec![('\t', '\r'), (' ', ' ')],
        "upper" => vec![('A', 'Z')],
        "lower" => vec![('a', 'z')],
        "punct" => vec![('!', '/'), (':', '@'), ('[', '`'), ('{', '~')],
        "xdigit" => vec![('0', '9'), ('A', 'F'), ('a', 'f')],
        "word" => vec![('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')],
        _ => return None,
    })
}

fn complement(set: &[(char, char)]) -> Vec<(char, char)> {
    let mut sorted = set.to_vec();
    sorted.sort();
    let mut out = Vec::new();
    let mut next = 0u32;
    for (a, b) in sorted {
        if (a as u32) > next {
            if let (Some(x), Some(y)) = (char::from_u32(next), char::from_u32(a as u32 - 1)) {
                out.push((x, y));
            }
        }
        next = next.max(b as u32 + 1);
    }
    if let Some(x) = char::from_u32(next) {
        out.push((x, char::MAX));
    }
    out
}

fn compile(node: &Node, prog: &mut Vec<Inst>) -> Result<(), String> {
    if prog.len() > MAX_PROG {
        return Err("pattern too large".to_string());
    }
    match node {
        Node::Empty => {}
        Node::Char(c) => prog.push(Inst::Char(*c)),
        Node::Any => prog.push(Inst::Any),
        Node::Class(items, neg) => prog.push(Inst::Class(items.clone(), *neg)),
        Node::Start => prog.push(Inst::Start),
        Node::End => prog.push(Inst::End),
        Node::WordB(b) => prog.push(Inst::WordB(*b)),
        Node::Concat(items) => {
            for n in items {
                compile(n, prog)?;
            }
        }
        Node::Alt(branches) => {
            let mut jumps = Vec::new();
            for (k, b) in branches.iter().enumerate() {
                if k + 1 < branches.len() {
                    let split = prog.len();
                    prog.push(Inst::Split(split + 1, 0));
                    compile(b, prog)?;
                    jumps.push(prog.len());
                    prog.push(Inst::Jmp(0));
                    let next = prog.len();
                    prog[split] = Inst::Split(split + 1, next);
                } else {
                    compile(b, prog)?;
                }
            }
            let end = prog.len();
            for j in jumps {
                prog[j] = Inst::Jmp(end);
            }
        }
        Node::Repeat(inner, min, max) => {
            for _ in 0..*min {
                compile(inner, prog)?;
            }
            match max {
                None => {
                    let split = prog.len();
                    prog.push(Inst::Split(split + 1, 0));
                    compile(inner, prog)?;
                    prog.push(Inst::Jmp(split));
                    let end = prog.len();
                    prog[split] = Inst::Split(split + 1, end);
                }
                Some(max) => {
                    let mut splits = Vec::new();
                    for _ in *min..*max {
                        splits.push(prog.len());
                        prog.push(Inst::Split(0, 0));
                        compile(inner, prog)?;
                    }
                    let end = prog.len();
                    for s in splits {
                        prog[s] = Inst::Split(s + 1, end);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Regex;

    fn m(p: &str, s: &str) -> bool {
        Regex::new(p, false).unwrap().is_match(s)
    }

    #[test]
    fn basics() {
        assert!(m("fn main", "pub fn main() {"));
        assert!(m("^fn", "fn x"));
        assert!(!m("^fn", " fn x"));
        assert!(m("x$", "abx"));
        assert!(m("a.c", "abc"));
        assert!(m("colou?r", "color"));
        assert!(m("(foo|bar)baz", "xbarbaz"));
        assert!(m("\\d{3}-\\d+", "tel 555-1234"));
        assert!(!m("\\d{3}-\\d+", "tel 55-1234"));
        assert!(m("[A-Z][a-z]+Error", "TypeError"));
        assert!(m("\\bword\\b", "a word here"));
        assert!(!m("\\bword\\b", "swordfish"));
        assert!(m("[^a-z]", "abc1"));
        assert!(!m("[^a-z]", "abc"));
        assert!(m("a{2,}", "caab"));
        assert!(m("(?:ab)+c", "ababc"));
        assert!(Regex::new("HELLO", true).unwrap().is_match("say hello"));
        assert!(Regex::new("(a", false).is_err());
        assert!(Regex::new("[a", false).is_err());
    }

    #[test]
    fn no_blowup() {
        let r = Regex::new("(a*)*b", false).unwrap();
        assert!(!r.is_match(&"a".repeat(5000)));
    }
}
