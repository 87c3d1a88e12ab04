//! The order of `ls`: the reference sorts names with
//! `a.toLowerCase().localeCompare(b.toLowerCase())`, i.e. ICU's root collation (the same for
//! every locale pi runs under: `C`, `C.UTF-8`, `en_US.UTF-8`, `de_DE.UTF-8` were checked with
//! Node 22 / ICU 78). That is not code-point order: punctuation sorts before digits and letters,
//! in its own order (`_` before `-` before `.`, so `agent_cx.rs` comes before `agent.rs`),
//! accents only break ties (`eclair`, `éclair`, `ecole`), `ß` sorts as `ss`, `²` as `2`.
//!
//! This is a small three-level collation that is exact for ASCII names (the table below is
//! ICU's order, with the common non-ASCII punctuation and symbols placed among them) and close
//! for others: letters with accents or compatibility forms (NFKD), `ß æ œ ø ł đ ð ħ ı` as their
//! base letters, other symbols after the emoji and other currency signs after `₹` by code point,
//! and letters of other scripts after `z` by code point (Greek, Cyrillic, …, CJK come in that
//! order in ICU too). Names that compare equal
//! (`README` and `readme`) keep readdir order in the reference; the caller breaks the tie by the
//! raw name so the output is deterministic.

use std::cmp::Ordering;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Characters with a primary weight, in ICU root order (measured with Node): ASCII and the
/// common non-ASCII punctuation and symbols between them. Characters in one entry share a
/// weight (they differ at the third level). ASCII control characters other than `\t\n\v\f\r`
/// are ignorable.
const ORDER: &[&str] = &[
    "\t",
    "\n",
    "\x0b",
    "\x0c",
    "\r",
    " ",
    "_",
    "-",
    "\u{2010}\u{2011}",
    "\u{2012}",
    "\u{2013}",
    "\u{2014}",
    "\u{2015}",
    ",",
    ";",
    ":",
    "!",
    "\u{a1}",
    "?",
    "\u{bf}",
    ".",
    "\u{b7}",
    "'\u{2018}\u{2019}",
    "\u{201a}",
    "\u{2039}",
    "\u{203a}",
    "\"\u{201c}\u{201d}\u{201e}",
    "\u{ab}",
    "\u{bb}",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "\u{a7}",
    "\u{b6}",
    "@",
    "*",
    "/",
    "\\",
    "&",
    "#",
    "%",
    "\u{2030}",
    "\u{2020}",
    "\u{2022}",
    "\u{2032}",
    "\u{203b}",
    "`",
    "\u{b4}",
    "^",
    "\u{af}",
    "\u{a8}",
    "\u{b8}",
    "\u{b0}",
    "\u{a9}",
    "\u{ae}",
    "\u{2192}",
    "\u{21d2}",
    "\u{2211}",
    "+",
    "\u{b1}",
    "\u{f7}",
    "\u{d7}",
    "<",
    "=",
    ">",
    "\u{ac}",
    "|",
    "\u{a6}",
    "~",
    "\u{2212}",
    "\u{221a}",
    "\u{221e}",
    "\u{2603}",
    "\u{2605}",
    "\u{2713}",
    "\u{1f389}",
    "\u{1f600}",
    // Other symbols go here (OTHER_SYMBOL), then the currency signs (OTHER_CURRENCY last).
    "\u{a4}",
    "\u{a2}",
    "$",
    "\u{a3}",
    "\u{a5}",
    "\u{20ac}",
    "\u{20b9}",
    "0",
    "1",
    "2",
    "3",
    "4",
    "5",
    "6",
    "7",
    "8",
    "9",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "i",
    "j",
    "k",
    "l",
    "m",
    "n",
    "o",
    "p",
    "q",
    "r",
    "s",
    "t",
    "u",
    "v",
    "w",
    "x",
    "y",
    "z",
];

/// Primary weight of a character listed in [`ORDER`].
fn listed_weight(c: char) -> Option<u32> {
    let table = weights();
    match table.ascii.get(c as usize) {
        Some(&w) => (w != 0).then_some(w),
        None => table
            .other
            .binary_search_by_key(&c, |&(k, _)| k)
            .ok()
            .map(|i| table.other[i].1),
    }
}

/// [`ORDER`] as lookup tables, built once: ASCII by index (0: not listed), the rest sorted.
struct Weights {
    ascii: [u32; 128],
    other: Vec<(char, u32)>,
}

fn weights() -> &'static Weights {
    static WEIGHTS: std::sync::OnceLock<Weights> = std::sync::OnceLock::new();
    WEIGHTS.get_or_init(|| {
        let mut w = Weights {
            ascii: [0; 128],
            other: Vec::new(),
        };
        for (i, entry) in ORDER.iter().enumerate() {
            let weight = 16 + 16 * i as u32;
            for c in entry.chars() {
                match w.ascii.get_mut(c as usize) {
                    Some(slot) if *slot == 0 => *slot = weight,
                    Some(_) => {}
                    None if w.other.iter().all(|&(k, _)| k != c) => w.other.push((c, weight)),
                    None => {}
                }
            }
        }
        // Keys are distinct: the shared stable sort gives the one order there is.
        crate::sort::sort_by(&mut w.other, Ord::cmp);
        w
    })
}

fn weight_of(c: char) -> u32 {
    listed_weight(c).unwrap_or(0)
}

/// The collation elements of one character (after lower-casing and NFKD).
fn elements(c: char, out: &mut Key) {
    if let Some(w) = listed_weight(c) {
        out.push(w, 1);
        return;
    }
    if c.is_ascii() {
        return; // ignorable control character
    }
    if is_combining_mark(c) {
        out.secondary.push(16 + c as u32);
        return;
    }
    // Letters ICU treats as a base letter with a difference, or as two letters.
    let base: &[char] = match c {
        '\u{df}' => &['s', 's'],
        '\u{e6}' => &['a', 'e'],
        '\u{153}' => &['o', 'e'],
        '\u{f8}' => &['o'],
        '\u{142}' => &['l'],
        '\u{111}' | '\u{f0}' => &['d'],
        '\u{127}' => &['h'],
        '\u{167}' => &['t'],
        '\u{131}' => &['i'],
        '\u{14b}' => &['n'],
        _ => &[],
    };
    if let [one] = base {
        out.push(weight_of(*one), 16 + c as u32);
    } else if !base.is_empty() {
        for b in base {
            out.push(weight_of(*b), 1);
        }
    } else if c.is_whitespace() {
        out.push(weight_of(' '), 16 + c as u32);
    } else if c.is_alphanumeric() {
        // Other scripts: after `z`, by code point.
        out.push(weight_of('z') + 16 + c as u32, 1);
    } else if matches!(c, '\u{20a0}'..='\u{20cf}') {
        out.push(weight_of('\u{20b9}') + 1, 1);
        out.push(c as u32, 1);
    } else {
        out.push(weight_of('\u{1f600}') + 1, 1);
        out.push(c as u32, 1);
    }
}

#[derive(Default, Debug, PartialEq)]
struct Key {
    primary: Vec<u32>,
    secondary: Vec<u32>,
    tertiary: Vec<u32>,
}

impl Key {
    fn push(&mut self, primary: u32, secondary: u32) {
        self.primary.push(primary);
        self.secondary.push(secondary);
    }

    fn of(name: &str) -> Key {
        if name.is_ascii() {
            Key::of_ascii(name)
        } else {
            Key::of_any(name)
        }
    }

    /// What [`Key::of_any`] gives for an ASCII name, without normalising.
    fn of_ascii(name: &str) -> Key {
        let mut k = Key::default();
        for c in name.bytes().map(|b| char::from(b.to_ascii_lowercase())) {
            if let Some(w) = listed_weight(c) {
                k.push(w, 1);
                k.tertiary.push(c as u32);
            }
        }
        k
    }

    fn of_any(name: &str) -> Key {
        let lower = name.to_lowercase();
        let mut k = Key::default();
        for c in lower.chars() {
            if listed_weight(c).is_some() {
                elements(c, &mut k);
            } else {
                // Compatibility forms as their letters (`ﬁ` → `fi`, `²` → `2`, `é` → `e` + ´),
                // but listed characters as themselves (`´` is not a space and an accent).
                unicode_normalization::char::decompose_compatible(c, |d| elements(d, &mut k));
            }
        }
        // Third level: the characters themselves (`ss` < `ß`, `a` < `ａ`, `fi` < `ﬁ`).
        k.tertiary = lower
            .nfc()
            .filter(|c| !c.is_ascii() || listed_weight(*c).is_some())
            .map(|c| c as u32)
            .collect();
        k
    }
}

/// `a.toLowerCase().localeCompare(b.toLowerCase())` (see the module docs for how exact).
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        return ascii_compare(a.as_bytes(), b.as_bytes());
    }
    let (ka, kb) = (Key::of(a), Key::of(b));
    ka.primary
        .cmp(&kb.primary)
        .then_with(|| ka.secondary.cmp(&kb.secondary))
        .then_with(|| ka.tertiary.cmp(&kb.tertiary))
}

/// JavaScript's `a.localeCompare(b)`, case kept (model ids, provider names): [`locale_compare`]
/// of the lowercased strings, then on a tie lower case before upper case, position by position.
pub fn locale_compare_cased(a: &str, b: &str) -> Ordering {
    locale_compare(a, b).then_with(|| {
        let case = |s: &str| s.chars().map(char::is_uppercase).collect::<Vec<bool>>();
        case(a).cmp(&case(b))
    })
}

/// The ASCII-only fast path: one level is enough once case is folded.
fn ascii_compare(a: &[u8], b: &[u8]) -> Ordering {
    let weights = |s: &'_ [u8]| -> Vec<u32> {
        s.iter()
            .filter_map(|c| listed_weight(char::from(c.to_ascii_lowercase())))
            .collect()
    };
    weights(a).cmp(&weights(b))
}

/// The order `ls` prints: [`locale_compare`], ties broken by the raw name.
pub fn ls_order(a: &str, b: &str) -> Ordering {
    locale_compare(a, b).then_with(|| a.cmp(b))
}

/// A key that sorts as [`ls_order`]: computed once per name, so sorting a large directory
/// costs one key per name instead of two per comparison. The three levels and the raw name
/// are one vector, each level ended by a 0 (below every weight and character in it), which
/// orders as the tuple of the four would: one allocation per name.
pub fn ls_key(name: &str) -> impl Ord + use<> {
    let mut key: Vec<u32>;
    if name.is_ascii() {
        // What [`Key::of_ascii`] gives, written straight into the key.
        let lower = || name.bytes().map(|b| char::from(b.to_ascii_lowercase()));
        key = Vec::with_capacity(4 * name.len() + 3);
        key.extend(lower().filter_map(listed_weight));
        let listed = key.len();
        key.push(0);
        key.extend(std::iter::repeat_n(1, listed));
        key.push(0);
        key.extend(
            lower()
                .filter(|c| listed_weight(*c).is_some())
                .map(u32::from),
        );
    } else {
        let k = Key::of_any(name);
        key = Vec::with_capacity(
            k.primary.len() + k.secondary.len() + k.tertiary.len() + name.len() + 3,
        );
        key.extend(&k.primary);
        key.push(0);
        key.extend(&k.secondary);
        key.push(0);
        key.extend(&k.tertiary);
    }
    key.push(0);
    key.extend(name.bytes().map(u32::from));
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorted by Node 22 (ICU 78) with `a.toLowerCase().localeCompare(b.toLowerCase())`.
    const NODE_ORDER: &[&str] = &[
        "__init__.py",
        "__main__.py",
        "_config.yml",
        "-dash",
        ".env",
        ".env.local",
        ".git",
        ".github",
        ".gitignore",
        "(paren)",
        "[x]",
        "{y}",
        "@scope",
        "#hash",
        "+plus",
        "~tilde",
        "$weird",
        "a b",
        "a_b",
        "a-b",
        "a.b",
        "a1",
        "a10",
        "a2",
        "A2x",
        "agent_cx.rs",
        "agent.rs",
        "Agent.ts",
        "cargo-x",
        "Cargo.lock",
        "Cargo.toml",
        "CHANGELOG-old.md",
        "CHANGELOG.md",
        "dist",
        "eclair",
        "éclair",
        "file_test.ts",
        "file-test.ts",
        "file.test.ts",
        "fileTest.ts",
        "index.d.ts",
        "index.js",
        "Makefile",
        "makefile.inc",
        "node_modules",
        "README.md",
        "readme.txt",
        "src",
        "ss.txt",
        "ß.txt",
        "test",
        "test_utils",
        "test-utils",
        "tests",
        "testUtils",
        "über",
        "umlaut.txt",
        "ümlaut.txt",
        "v1_0",
        "v1.0",
        "v10",
        "v2",
        "x.d.ts",
        "x.ts",
        "zeta",
        "Ω.txt",
        "日本.md",
    ];

    #[test]
    fn matches_node_for_repository_names() {
        let mut names: Vec<&str> = NODE_ORDER.iter().rev().copied().collect();
        names.sort_by(|a, b| ls_order(a, b));
        assert_eq!(names, NODE_ORDER);
    }

    #[test]
    fn single_characters_in_icu_order() {
        // Node: `[...].sort((a, b) => a.localeCompare(b))` over these characters.
        let node = [
            " ", "_", "-", "–", "`", "°", "©", "~", "😀", "$", "€", "0", "1", "①", "2", "²", "a",
            "ａ", "á", "ae", "æ", "af", "d", "ð", "e", "é", "f", "fi", "ﬁ", "i", "ı", "l", "ł",
            "m", "n", "ñ", "o", "ø", "p", "ss", "ß", "st", "t", "u", "ü", "v", "z", "α", "ω", "я",
            "日", "本",
        ];
        let mut v: Vec<&str> = node.iter().rev().copied().collect();
        v.sort_by(|a, b| ls_order(a, b));
        assert_eq!(v, node);
    }

    #[test]
    fn symbols_in_icu_order() {
        let node: Vec<String> = "_ - \u{2010} \u{2012} \u{2013} \u{2014} \u{2015} , ; : ! \u{a1} ? \u{bf} . \u{b7} ' \u{201a} \u{2039} \u{203a} \" \u{ab} \u{bb} ( ) [ ] { } \u{a7} \u{b6} @ * / \\\\ & # % \u{2030} \u{2020} \u{2022} \u{2032} \u{203b} ` \u{b4} ^ \u{af} \u{a8} \u{b8} \u{b0} \u{a9} \u{ae} \u{2192} \u{21d2} \u{2211} + \u{b1} \u{f7} \u{d7} < = > \u{ac} | \u{a6} ~ \u{2212} \u{221a} \u{221e} \u{2603} \u{2605} \u{2713} \u{1f389} \u{1f600} \u{a4} \u{a2} $ \u{a3} \u{a5} \u{20ac} \u{20b9}"
            .split(' ')
            .map(|s| s.replace("\\\\", "\\"))
            .collect();
        let mut v = node.clone();
        v.reverse();
        v.sort_by(|a, b| ls_order(a, b));
        assert_eq!(v, node);
        assert_eq!(locale_compare("a\u{2018}a", "a'b"), Ordering::Less);
        assert_eq!(locale_compare("a\u{2010}b", "a-c"), Ordering::Greater);
    }

    #[test]
    fn keys_sort_as_the_comparison() {
        let mut names: Vec<String> = NODE_ORDER.iter().map(|s| s.to_string()).collect();
        names.extend(
            [
                "a\u{1}b",
                "ab",
                "AB",
                "a\u{2018}a",
                "a'b",
                "ｆｉ",
                "fi",
                "²",
                "2",
            ]
            .map(String::from),
        );
        for a in &names {
            for b in &names {
                assert_eq!(ls_key(a).cmp(&ls_key(b)), ls_order(a, b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn ascii_keys_are_the_general_keys() {
        let every: String = (0u8..128).map(char::from).collect();
        for name in NODE_ORDER
            .iter()
            .copied()
            .filter(|n| n.is_ascii())
            .chain([every.as_str()])
        {
            assert_eq!(Key::of_ascii(name), Key::of_any(name), "{name:?}");
        }
    }

    #[test]
    fn case_only_differences_tie() {
        assert_eq!(locale_compare("README", "readme"), Ordering::Equal);
        assert_eq!(ls_order("README", "readme"), Ordering::Less);
        assert_eq!(locale_compare("a\u{1}b", "ab"), Ordering::Equal);
    }
}
