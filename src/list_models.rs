//! `--list-models [search]`: the table pi prints (pure; the caller prints it). The available
//! models (those whose provider has a key), narrowed by pi's fuzzy filter when a search is given,
//! sorted by provider then id the way JavaScript's `localeCompare` sorts them, in aligned
//! columns: `provider  model  context  max-out  thinking  images`.

use std::cmp::Ordering;

use crate::llm::Model;

/// What pith prints when no provider has a key (pi's text points at its `/login` command, which
/// pith does not have).
pub const NO_MODELS: &str = "No models available. Set a provider's API key in the environment (e.g. ANTHROPIC_API_KEY), in auth.json or with --api-key, or configure a provider in models.json.";

/// One model as the table shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub provider: String,
    pub id: String,
    pub context_window: u64,
    pub max_tokens: u64,
    pub reasoning: bool,
    pub images: bool,
}

impl Row {
    pub fn of(m: &Model) -> Row {
        Row {
            provider: m.provider.clone(),
            id: m.id.clone(),
            context_window: m.context_window,
            max_tokens: m.max_tokens,
            reasoning: m.reasoning,
            images: m.input.iter().any(|i| i == "image"),
        }
    }

    /// A model of a `get_available_models` answer (every version's shape has these fields);
    /// `None` when one is missing.
    pub fn of_json(v: &serde_json::Value) -> Option<Row> {
        Some(Row {
            provider: v.get("provider")?.as_str()?.to_string(),
            id: v.get("id")?.as_str()?.to_string(),
            context_window: v.get("contextWindow")?.as_u64()?,
            max_tokens: v.get("maxTokens")?.as_u64()?,
            reasoning: v.get("reasoning")?.as_bool()?,
            images: v
                .get("input")?
                .as_array()?
                .iter()
                .any(|i| i.as_str() == Some("image")),
        })
    }
}

/// The lines to print (each without its newline).
pub fn lines(models: &[&Model], search: Option<&str>) -> Vec<String> {
    lines_of(models.iter().map(|m| Row::of(m)).collect(), search)
}

/// [`lines`] over rows.
pub fn lines_of(models: Vec<Row>, search: Option<&str>) -> Vec<String> {
    if models.is_empty() {
        return vec![NO_MODELS.to_string()];
    }
    let mut shown: Vec<Row> = match search {
        Some(q) if !q.trim().is_empty() => models
            .into_iter()
            .filter(|m| fuzzy_filter_match(q, &format!("{} {}", m.provider, m.id)))
            .collect(),
        _ => models,
    };
    if shown.is_empty() {
        return vec![format!("No models matching \"{}\"", search.unwrap_or(""))];
    }
    crate::sort::sort_by(&mut shown, |a, b| {
        locale_compare(&a.provider, &b.provider).then_with(|| locale_compare(&a.id, &b.id))
    });
    let header = [
        "provider", "model", "context", "max-out", "thinking", "images",
    ]
    .map(String::from);
    let rows: Vec<[String; 6]> = shown
        .into_iter()
        .map(|m| {
            [
                m.provider,
                m.id,
                token_count(m.context_window),
                token_count(m.max_tokens),
                yes_no(m.reasoning),
                yes_no(m.images),
            ]
        })
        .collect();
    let mut widths = [0usize; 6];
    for r in std::iter::once(&header).chain(rows.iter()) {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(js_len(c));
        }
    }
    std::iter::once(&header)
        .chain(rows.iter())
        .map(|r| {
            r.iter()
                .zip(widths)
                .map(|(c, w)| format!("{c}{}", " ".repeat(w - js_len(c))))
                .collect::<Vec<_>>()
                .join("  ")
        })
        .collect()
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// String length as JavaScript counts it (UTF-16 units), for `padEnd`.
fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// pi's `formatTokenCount`: `200K`, `1M`, `1.5M`, `131.1K`, `512`.
pub fn token_count(n: u64) -> String {
    if n >= 1_000_000 {
        if n.is_multiple_of(1_000_000) {
            format!("{}M", n / 1_000_000)
        } else {
            format!("{}M", to_fixed_1(n as f64 / 1_000_000.0))
        }
    } else if n >= 1_000 {
        if n.is_multiple_of(1_000) {
            format!("{}K", n / 1_000)
        } else {
            format!("{}K", to_fixed_1(n as f64 / 1_000.0))
        }
    } else {
        n.to_string()
    }
}

/// JavaScript's `x.toFixed(1)` for a positive `x`: rounded on the exact binary value, a tie
/// rounding up (Rust's own formatting rounds a tie to even).
fn to_fixed_1(x: f64) -> String {
    // 60 digits resolve every double near a tie: the exact expansion decides.
    let exact = format!("{x:.60}");
    let (int, frac) = exact.split_once('.').unwrap_or((&exact, "0"));
    let mut digits = frac.bytes().map(|b| u64::from(b.saturating_sub(b'0')));
    let (d1, d2) = (digits.next().unwrap_or(0), digits.next().unwrap_or(0));
    let tenths = int.parse::<u64>().unwrap_or(0) * 10 + d1 + u64::from(d2 >= 5);
    format!("{}.{}", tenths / 10, tenths % 10)
}

/// pi-tui's `fuzzyFilter` keep/drop decision (its score only orders results, which pi then
/// re-sorts): every whitespace-separated token of the query must match.
pub fn fuzzy_filter_match(query: &str, text: &str) -> bool {
    query
        .split_whitespace()
        .all(|token| fuzzy_match(token, text))
}

/// pi-tui's `fuzzyMatch`: the query's characters in order in the text, case-insensitively; a
/// query of letters then digits (or digits then letters) may also match swapped (`gpt5` finds
/// `5gpt`).
fn fuzzy_match(query: &str, text: &str) -> bool {
    let q = query.to_lowercase();
    let t = text.to_lowercase();
    if subsequence(&q, &t) {
        return true;
    }
    let split = q.find(|c: char| c.is_ascii_digit()).unwrap_or(q.len());
    let (a, b) = q.split_at(split);
    let letters_digits = !a.is_empty()
        && !b.is_empty()
        && a.bytes().all(|c| c.is_ascii_lowercase())
        && b.bytes().all(|c| c.is_ascii_digit());
    let split = q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len());
    let (c, d) = q.split_at(split);
    let digits_letters = !c.is_empty()
        && !d.is_empty()
        && c.bytes().all(|x| x.is_ascii_digit())
        && d.bytes().all(|x| x.is_ascii_lowercase());
    if letters_digits {
        subsequence(&format!("{b}{a}"), &t)
    } else if digits_letters {
        subsequence(&format!("{d}{c}"), &t)
    } else {
        false
    }
}

fn subsequence(q: &str, t: &str) -> bool {
    if q.encode_utf16().count() > t.encode_utf16().count() {
        return false;
    }
    let mut want = q.chars().peekable();
    for c in t.chars() {
        if want.peek() == Some(&c) {
            want.next();
        }
    }
    want.peek().is_none()
}

/// JavaScript's `a.localeCompare(b)` (ICU root collation: punctuation before digits before
/// letters, accents and then case only breaking ties), as pi sorts the table.
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    crate::tools::collate::locale_compare_cased(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(provider: &str, id: &str, ctx: u64, max: u64, reasoning: bool, image: bool) -> Model {
        Model {
            id: id.into(),
            name: id.into(),
            api: "anthropic-messages".into(),
            provider: provider.into(),
            base_url: String::new(),
            reasoning,
            input: if image {
                vec!["text".into(), "image".into()]
            } else {
                vec!["text".into()]
            },
            cost: Default::default(),
            context_window: ctx,
            max_tokens: max,
            headers: None,
            compat: None,
            ..Default::default()
        }
    }

    #[test]
    fn token_counts_like_pi() {
        for (n, s) in [
            (512, "512"),
            (1000, "1K"),
            (131072, "131.1K"),
            (200000, "200K"),
            (1250, "1.3K"),
            (1150, "1.1K"),
            (1050, "1.1K"),
            (1_000_000, "1M"),
            (1_048_576, "1.0M"),
            (2_500_000, "2.5M"),
            (999_950, "1000.0K"),
        ] {
            assert_eq!(token_count(n), s, "{n}");
        }
    }

    #[test]
    fn locale_order_like_javascript() {
        // `[...].sort((a, b) => a.localeCompare(b))` in node.
        let mut v = vec![
            "gpt-4o",
            "gpt-4.1",
            "gpt-4o-mini",
            "gpt-4",
            "gpt-40",
            "GPT-4",
            "a_b",
            "ab",
            "a-b",
            "a",
            "A",
            "a1",
            "a10",
            "a2",
            "b",
            "B",
            "a.b",
        ];
        v.sort_by(|a, b| locale_compare(a, b));
        assert_eq!(
            v,
            [
                "a",
                "A",
                "a_b",
                "a-b",
                "a.b",
                "a1",
                "a10",
                "a2",
                "ab",
                "b",
                "B",
                "gpt-4",
                "GPT-4",
                "gpt-4.1",
                "gpt-40",
                "gpt-4o",
                "gpt-4o-mini"
            ]
        );
    }

    #[test]
    fn fuzzy_like_pi_tui() {
        assert!(fuzzy_filter_match("sonnet", "anthropic claude-sonnet-4-5"));
        assert!(fuzzy_filter_match(
            "anth son",
            "anthropic claude-sonnet-4-5"
        ));
        assert!(!fuzzy_filter_match(
            "anth gpt",
            "anthropic claude-sonnet-4-5"
        ));
        assert!(fuzzy_filter_match("CLS", "anthropic claude-sonnet"));
        assert!(fuzzy_filter_match("gpt5", "openai gpt-5"));
        assert!(fuzzy_filter_match("5gpt", "openai gpt-5"));
        assert!(!fuzzy_filter_match("zz", "openai gpt-5"));
    }

    #[test]
    fn the_table() {
        let a = model("fake", "fake-model", 200000, 16384, true, true);
        let b = model("fake", "fake-model-2", 100000, 8192, false, false);
        let c = model("alpha", "x", 1_500_000, 512, false, true);
        let out = lines(&[&a, &b, &c], None);
        assert_eq!(
            out,
            [
                "provider  model         context  max-out  thinking  images",
                "alpha     x             1.5M     512      no        yes   ",
                "fake      fake-model    200K     16.4K    yes       yes   ",
                "fake      fake-model-2  100K     8.2K     no        no    ",
            ]
        );
        assert_eq!(
            lines(&[&a, &b, &c], Some("model-2")),
            [
                "provider  model         context  max-out  thinking  images",
                "fake      fake-model-2  100K     8.2K     no        no    ",
            ]
        );
        assert_eq!(
            lines(&[&a], Some("nothing")),
            ["No models matching \"nothing\""]
        );
        assert_eq!(lines(&[], None), [NO_MODELS]);
    }

    /// Node's `localeCompare` sort of these (ICU root): accents and `ß æ ø ł đ` tie-break after
    /// their base letters, case last, other scripts after Latin.
    #[test]
    fn collation_matches_javascript_beyond_ascii() {
        let node = [
            "A", "å", "Å", "a_b", "a-b", "a.b", "a1", "a10", "a9", "ab", "ae", "æ", "af", "b", "d",
            "đ", "dz", "e", "é", "e1", "E1", "é1", "e2", "ea", "éa", "éA", "Éa", "ee", "eé", "ée",
            "éé", "ez", "f", "l", "ł", "lz", "m", "n", "ñ", "nz", "o", "ø", "oz", "p", "sr", "ss",
            "ß", "st", "u", "ü", "uz", "y", "ÿ", "z", "Z", "ω", "Ω", "я", "中",
        ];
        let mut v = node.to_vec();
        v.reverse();
        v.sort_by(|a, b| locale_compare(a, b));
        assert_eq!(v, node);
    }
}
