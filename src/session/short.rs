//! [`Short`]: an immutable string that keeps up to 22 bytes inline, for the small strings every
//! entry of a session carries (ids, parent ids, its type). A 20,000-entry session has 60,000 of
//! them: inline they cost no allocation, no pointer chasing and no allocator overhead.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Bytes kept inline.
const INLINE: usize = 22;

/// A string, inline when short (24 bytes either way).
#[derive(Clone)]
pub struct Short(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl Short {
    pub fn new(s: &str) -> Short {
        if s.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Short(Repr::Inline {
                len: s.len() as u8,
                bytes,
            })
        } else {
            Short(Repr::Heap(s.into()))
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                // SAFETY: `Repr::Inline` is only made by `Short::new`, from a `&str` copied whole
                // (`len` is its length) and never changed after: always valid UTF-8. (Checking
                // it again on every look-up was a few percent of loading a long session.)
                unsafe { std::str::from_utf8_unchecked(&bytes[..*len as usize]) }
            }
            Repr::Heap(s) => s,
        }
    }
}

impl Deref for Short {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Short {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

// Hashes and compares as the `str` it holds, so maps keyed by it are looked up with `&str`.
impl Hash for Short {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl PartialEq for Short {
    fn eq(&self, other: &Short) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Short {}

impl std::fmt::Debug for Short {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for Short {
    fn from(s: &str) -> Short {
        Short::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_strings_round_trip() {
        for s in [
            "",
            "a",
            "0000abcd",
            "é☃ and more bytes!!",
            &"x".repeat(22),
            &"y".repeat(23),
            &"é".repeat(40),
        ] {
            let t = Short::new(s);
            assert_eq!(t.as_str(), s);
            assert_eq!(&*t.clone(), s);
        }
        assert_eq!(std::mem::size_of::<Short>(), 24);
        let mut m = std::collections::HashMap::new();
        m.insert(Short::new("abc"), 1);
        m.insert(Short::new(&"z".repeat(30)), 2);
        assert_eq!(m.get("abc"), Some(&1));
        assert_eq!(m.get("z".repeat(30).as_str()), Some(&2));
        assert_eq!(m.get("abd"), None);
    }
}
