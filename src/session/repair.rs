//! Reading damaged session files without losing what is intact (pure core, no I/O).
//!
//! A session file is damaged when a write was cut short — a full disk, a file size limit, a crash
//! or a kill in the middle of a `write` — by pi, by an older pith, or by another program. What that
//! leaves behind is half a line, and when the writer did not notice, the next entry glued onto
//! it: `{"type":"message","id":"a1","parentId":"f0",…<cut>{"type":"message","id":"b2","parentId":"a1",…}`.
//! pi skips such a line whole, and since every later entry is found by walking `parentId` links
//! back from the last one, the walk stops at the missing entry: everything before it disappears
//! from the conversation. Here:
//!
//! - [`object_starts`] finds where a complete entry glued onto a damaged line may start, so the
//!   loader keeps it (the caller tries each start in order and keeps the first that parses);
//! - [`TornHead`] reads the `id` and `parentId` that head the damaged part (every entry line
//!   starts with `type`, `id`, `parentId`), so the link through it is known;
//! - [`bridge`] decides where an entry whose parent was lost attaches instead: to the lost
//!   entry's own parent when the damaged line still says which, else to the entry written just
//!   before the damaged line (entries are appended in order, so that is the leaf the lost entry
//!   was attached to, unless the user had just moved the leaf).

use std::collections::{HashMap, HashSet};

/// Where a complete JSON object may start inside a damaged line: every `{"type":"` after the
/// line's first byte, left to right.
pub fn object_starts(line: &[u8]) -> impl Iterator<Item = usize> + '_ {
    const PATTERN: &[u8] = b"{\"type\":\"";
    let mut from = 1;
    std::iter::from_fn(move || {
        while from < line.len() {
            let rest = &line[from..];
            let at = from + rest.iter().position(|&b| b == b'{')?;
            from = at + 1;
            if line[at..].starts_with(PATTERN) {
                return Some(at);
            }
        }
        None
    })
}

/// The leading fields of a damaged entry line that could still be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TornHead {
    /// `id`, when the line got that far.
    pub id: Option<String>,
    /// `parentId`: `Some(None)` for `null` (a root entry), `None` when it was not reached.
    pub parent_id: Option<Option<String>>,
}

impl TornHead {
    /// Read the top-level `"key":"string"` / `"key":null` pairs at the start of `line` up to the
    /// first other value (or the cut), keeping `id` and `parentId`.
    pub fn read(line: &[u8]) -> TornHead {
        let mut head = TornHead::default();
        let mut at = skip_ws(line, 0);
        if line.get(at) != Some(&b'{') {
            return head;
        }
        at += 1;
        loop {
            at = skip_ws(line, at);
            let Some((key, next)) = string_at(line, at) else {
                return head;
            };
            at = skip_ws(line, next);
            if line.get(at) != Some(&b':') {
                return head;
            }
            at = skip_ws(line, at + 1);
            let value = if line[at..].starts_with(b"null") {
                at += 4;
                None
            } else {
                let Some((v, next)) = string_at(line, at) else {
                    return head;
                };
                at = next;
                Some(v)
            };
            match key.as_str() {
                "id" => head.id = value,
                "parentId" => head.parent_id = Some(value),
                _ => {}
            }
            at = skip_ws(line, at);
            if line.get(at) != Some(&b',') {
                return head;
            }
            at += 1;
        }
    }
}

fn skip_ws(line: &[u8], mut at: usize) -> usize {
    while line.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The JSON string starting at `at` (unescaped) and the index after it.
fn string_at(line: &[u8], at: usize) -> Option<(String, usize)> {
    if line.get(at) != Some(&b'"') {
        return None;
    }
    let mut end = at + 1;
    loop {
        match line.get(end)? {
            b'"' => break,
            b'\\' => end += 2,
            _ => end += 1,
        }
    }
    let text = serde_json::from_slice::<String>(line.get(at..=end)?).ok()?;
    Some((text, end + 1))
}

/// A damaged line met while loading: how many entries were read before it, and its head.
#[derive(Clone, Debug)]
pub struct Damage {
    pub entries_before: usize,
    pub head: TornHead,
}

/// Where an entry whose parent is missing attaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bridge {
    /// It becomes a root (the lost entry was one).
    Root,
    /// To the entry at this index.
    At(usize),
}

/// The damaged lines of one file, indexed for [`Repairs::bridge`].
pub struct Repairs {
    by_id: HashMap<String, usize>,
    damage: Vec<Damage>,
    /// `entries_before` of every damaged line: an entry right after one.
    after_damage: HashSet<usize>,
}

impl Repairs {
    pub fn new(damage: Vec<Damage>) -> Repairs {
        let mut by_id = HashMap::new();
        for (i, d) in damage.iter().enumerate() {
            if let Some(id) = &d.head.id {
                by_id.entry(id.clone()).or_insert(i);
            }
        }
        let after_damage = damage.iter().map(|d| d.entries_before).collect();
        Repairs {
            by_id,
            damage,
            after_damage,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.damage.is_empty()
    }

    /// Where entry `index`, whose parent `missing` is in no complete line, attaches; `None`:
    /// leave it alone (its parent was never in the file as far as anything shows). `resolve`
    /// finds an entry by id.
    pub fn bridge(
        &self,
        index: usize,
        missing: &str,
        resolve: impl Fn(&str) -> Option<usize>,
    ) -> Option<Bridge> {
        let before = |n: usize| match n {
            0 => Bridge::Root,
            n => Bridge::At(n - 1),
        };
        let mut want = missing.to_string();
        // Follow lost entries whose damaged lines name their parent (each at most once).
        for _ in 0..=self.damage.len() {
            let Some(&d) = self.by_id.get(&want) else {
                break;
            };
            let d = &self.damage[d];
            match &d.head.parent_id {
                Some(None) => return Some(Bridge::Root),
                Some(Some(p)) => match resolve(p) {
                    Some(i) => return Some(Bridge::At(i)),
                    None => want = p.clone(),
                },
                None => return Some(before(d.entries_before)),
            }
        }
        // The parent is unnamed anywhere: if a damaged line came right before this entry, it
        // most likely held the parent, attached to the entry before it.
        self.after_damage.contains(&index).then(|| before(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_of_glued_objects() {
        let line = br#"{"type":"message","id":"a","message":{"content":[{"type":"text","text":"hel{"type":"message","id":"b"}"#;
        let starts: Vec<usize> = object_starts(line).collect();
        let text = std::str::from_utf8(line).unwrap();
        assert_eq!(
            starts,
            [
                text.find(r#"{"type":"text""#).unwrap(),
                text.rfind(r#"{"type":"message""#).unwrap()
            ]
        );
        assert_eq!(object_starts(b"").count(), 0);
        assert_eq!(object_starts(b"{").count(), 0);
        assert_eq!(object_starts(b"{{\"type\":\"").count(), 1);
        assert_eq!(object_starts(b"x{\"type\"").count(), 0);
    }

    #[test]
    fn head_of_a_torn_line() {
        let h = TornHead::read(
            br#"{"type":"message","id":"a1\"x","parentId":"f0","timestamp":"2026-01-0"#,
        );
        assert_eq!(h.id.as_deref(), Some("a1\"x"));
        assert_eq!(h.parent_id, Some(Some("f0".to_string())));
        let h = TornHead::read(br#"{"type":"message","id":"a1","parentId":null,"message":{"#);
        assert_eq!(h.parent_id, Some(None));
        let h = TornHead::read(br#"{"type":"message","id":"a1","paren"#);
        assert_eq!(h.id.as_deref(), Some("a1"));
        assert_eq!(h.parent_id, None);
        // custom entries put their own fields first: the head stops at the first non-string.
        let h =
            TornHead::read(br#"{"type":"custom","customType":"x","data":{"id":"no"},"id":"c"}"#);
        assert_eq!(h, TornHead::default());
        assert_eq!(TornHead::read(b"garbage"), TornHead::default());
        assert_eq!(TornHead::read(br#"{"id":"a\"#), TornHead::default());
        assert_eq!(TornHead::read(br#"{"id":"\ud800"}"#), TornHead::default());
    }

    fn damage(before: usize, id: Option<&str>, parent: Option<Option<&str>>) -> Damage {
        Damage {
            entries_before: before,
            head: TornHead {
                id: id.map(str::to_string),
                parent_id: parent.map(|p| p.map(str::to_string)),
            },
        }
    }

    #[test]
    fn bridges_over_lost_entries() {
        let ids = ["e0", "e1", "e3"];
        let resolve = |id: &str| ids.iter().position(|i| *i == id);
        // e2 (parent e1) was torn; e3 → e2 attaches to e1.
        let r = Repairs::new(vec![damage(2, Some("e2"), Some(Some("e1")))]);
        assert_eq!(r.bridge(2, "e2", resolve), Some(Bridge::At(1)));
        // Two lost in a row: e2 → e1.5 → e1.
        let r = Repairs::new(vec![
            damage(2, Some("e1.5"), Some(Some("e1"))),
            damage(2, Some("e2"), Some(Some("e1.5"))),
        ]);
        assert_eq!(r.bridge(2, "e2", resolve), Some(Bridge::At(1)));
        // A lost root.
        let r = Repairs::new(vec![damage(0, Some("e2"), Some(None))]);
        assert_eq!(r.bridge(2, "e2", resolve), Some(Bridge::Root));
        // The lost line's parent is not readable: the entry before the damaged line.
        let r = Repairs::new(vec![damage(2, Some("e2"), None)]);
        assert_eq!(r.bridge(2, "e2", resolve), Some(Bridge::At(1)));
        // Nothing readable at all, but the damaged line is right before the entry.
        let r = Repairs::new(vec![damage(2, None, None)]);
        assert_eq!(r.bridge(2, "zz", resolve), Some(Bridge::At(1)));
        assert_eq!(r.bridge(1, "zz", resolve), None);
        let r = Repairs::new(vec![damage(0, None, None)]);
        assert_eq!(r.bridge(0, "zz", resolve), Some(Bridge::Root));
        // A loop of lost entries naming each other ends.
        let r = Repairs::new(vec![
            damage(5, Some("x"), Some(Some("y"))),
            damage(5, Some("y"), Some(Some("x"))),
        ]);
        assert_eq!(r.bridge(2, "x", resolve), None);
    }
}
