//! Error bodies that are not JSON, made fit for an `errorMessage` (pure core, no I/O).
//!
//! A provider behind a proxy or CDN answers failures with whatever the proxy sends: often a
//! whole HTML page (a 24 KB Cloudflare "502 Bad gateway" page, say). The SDKs put such a body
//! verbatim into the error text, so a host shows, logs and stores kilobytes of markup for every
//! failed attempt, and the model's next request can carry it too. Here a markup body is reduced
//! to what identifies the error — its `<title>` and the first lines of its visible text — and
//! any other long text is cut, both with a note of the original size. JSON bodies (what the
//! APIs send) and short text pass through unchanged.

use std::borrow::Cow;

/// Longest plain-text body kept whole, in bytes.
pub const MAX_TEXT_BYTES: usize = 1000;
/// Longest `<title>` kept, in bytes.
const MAX_TITLE_BYTES: usize = 200;
/// Visible text kept from a markup page, in bytes (whole lines while under this).
const MAX_PAGE_TEXT_BYTES: usize = 300;

/// `body` as it should appear after the status in an error message.
pub fn readable(body: &str) -> Cow<'_, str> {
    let trimmed = body.trim_start();
    if trimmed.starts_with('<') {
        return Cow::Owned(summarize_markup(body));
    }
    if body.len() <= MAX_TEXT_BYTES || serde_json::from_str::<serde::de::IgnoredAny>(body).is_ok() {
        return Cow::Borrowed(body);
    }
    Cow::Owned(format!(
        "{}… [{} bytes]",
        cut(body.trim_end(), MAX_TEXT_BYTES),
        body.len()
    ))
}

/// `<title>: <first lines of text> [page of N bytes]` (parts that are empty left out).
fn summarize_markup(page: &str) -> String {
    let (title, text) = visible_text(page);
    let title = collapse(&title);
    let mut lines = Vec::new();
    let mut kept = 0;
    for line in text.lines().map(collapse).filter(|l| !l.is_empty()) {
        if line == title || kept >= MAX_PAGE_TEXT_BYTES {
            continue;
        }
        kept += line.len() + 1;
        lines.push(line);
    }
    let mut joined = lines.join(" ");
    if joined.len() > MAX_PAGE_TEXT_BYTES {
        joined = format!("{}…", cut(&joined, MAX_PAGE_TEXT_BYTES));
    }
    let title = if title.len() > MAX_TITLE_BYTES {
        format!("{}…", cut(&title, MAX_TITLE_BYTES))
    } else {
        title
    };
    let mut out = String::new();
    for part in [title, joined] {
        if part.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&part);
    }
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(&format!("[page of {} bytes]", page.len()));
    out
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Runs of whitespace as one space, trimmed.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The page's title and its visible text (block elements start new lines; scripts, styles, the
/// head and comments left out; entities decoded). One pass, linear in the page.
fn visible_text(page: &str) -> (String, String) {
    let mut title = String::new();
    let mut text = String::new();
    let mut rest = page;
    // Inside an element whose content is not shown (its name), or inside <title>.
    let mut hidden: Option<String> = None;
    let mut in_title = false;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            push_text(rest, in_title, hidden.is_some(), &mut title, &mut text);
            break;
        };
        push_text(
            &rest[..lt],
            in_title,
            hidden.is_some(),
            &mut title,
            &mut text,
        );
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(gt) = rest.find('>') else {
            break; // a cut tag: nothing visible follows
        };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if let Some(h) = &hidden {
            if closing && *h == name {
                hidden = None;
            }
            continue;
        }
        match name.as_str() {
            "title" => in_title = !closing,
            "script" | "style" | "noscript" | "template" | "svg"
                if !closing && !tag.ends_with('/') =>
            {
                hidden = Some(name);
            }
            "p" | "div" | "br" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "li" | "tr" | "hr"
            | "pre" | "center" | "table" | "section" | "header" | "footer" | "main" | "body"
            | "article" | "blockquote" | "dt" | "dd" => text.push('\n'),
            // Other tags still separate words (`<td>a</td><td>b</td>`, XML elements).
            _ if !in_title => text.push(' '),
            _ => {}
        }
    }
    (title, text)
}

fn push_text(raw: &str, in_title: bool, hidden: bool, title: &mut String, text: &mut String) {
    if hidden || raw.is_empty() {
        return;
    }
    let to = if in_title { title } else { text };
    decode_entities(raw, to);
}

/// The common HTML entities (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&nbsp;`, dashes,
/// `&hellip;`, `&copy;`, numeric ones); anything else is kept as written.
fn decode_entities(raw: &str, out: &mut String) {
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest[1..].find(';').map(|e| e + 1).filter(|&e| e <= 10);
        let decoded = end.and_then(|e| {
            let name = &rest[1..e];
            let c = match name {
                "amp" => '&',
                "lt" => '<',
                "gt" => '>',
                "quot" => '"',
                "apos" => '\'',
                "nbsp" => ' ',
                "mdash" => '—',
                "ndash" => '–',
                "hellip" => '…',
                "copy" => '©',
                _ => {
                    let num = name.strip_prefix('#')?;
                    let code = match num.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => num.parse().ok()?,
                    };
                    char::from_u32(code)?
                }
            };
            Some((c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a CDN's 502 page: a head with styles and scripts, the error in the body,
    /// kilobytes of markup around it.
    fn cdn_page() -> String {
        let filler = "<div class=\"pad\"><span>&nbsp;</span></div>\n".repeat(500);
        format!(
            r#"<!DOCTYPE html>
<!--[if lt IE 7]> <html class="no-js ie6 oldie" lang="en-US"> <![endif]-->
<html lang="en-US">
<head>
<title>api.example.com | 502: Bad gateway</title>
<meta charset="UTF-8" />
<style>body {{ margin: 0; }} .pad {{ display: none; }}</style>
<script>window.x = "<div>not text</div>";</script>
</head>
<body>
<div id="cf-wrapper">
  <h1><span class="code-label">Error code 502</span></h1>
  <p>Visit <a href="https://www.cloudflare.com/">cloudflare.com</a> for more information.</p>
  <p>2026-11-21 22:10:33 UTC &mdash; Bad gateway &amp; more</p>
</div>
{filler}
</body>
</html>"#
        )
    }

    #[test]
    fn an_html_page_becomes_its_title_and_first_lines() {
        let page = cdn_page();
        assert!(page.len() > 20_000);
        assert_eq!(
            readable(&page),
            format!(
                "api.example.com | 502: Bad gateway: Error code 502 Visit cloudflare.com for more information. 2026-11-21 22:10:33 UTC — Bad gateway & more [page of {} bytes]",
                page.len()
            )
        );
    }

    #[test]
    fn json_and_short_text_pass_unchanged() {
        assert_eq!(
            readable(r#"{"error":{"message":"x"}}"#),
            r#"{"error":{"message":"x"}}"#
        );
        assert_eq!(readable("upstream exploded"), "upstream exploded");
        assert_eq!(readable(""), "");
        let big_json = format!(r#"{{"message":"{}"}}"#, "m".repeat(5000));
        assert_eq!(readable(&big_json), big_json.as_str());
    }

    #[test]
    fn long_text_is_cut_with_its_size() {
        let long = "é".repeat(3000);
        let r = readable(&long);
        assert!(r.ends_with("… [6000 bytes]"), "{r}");
        assert!(r.len() < MAX_TEXT_BYTES + 40);
    }

    #[test]
    fn odd_markup_is_bounded_and_never_panics() {
        for page in [
            "<",
            "<html",
            "<!--",
            "<title>",
            "<title>&#xFFFFFFFF;&#99999999999;&;&#;&#x;</title>",
            "<script>never closed",
            "<p>&amp</p>",
            "<x>é&é</x>",
        ] {
            let r = readable(page);
            assert!(
                r.ends_with(&format!("[page of {} bytes]", page.len())),
                "{page} → {r}"
            );
        }
        let page = format!(
            "<title>{}</title><p>{}</p>",
            "t".repeat(5000),
            "w ".repeat(5000)
        );
        let r = readable(&page);
        assert!(r.len() < 600, "{}", r.len());
        // XML errors (object stores) read as their text.
        assert_eq!(
            readable(
                "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            ),
            "AccessDenied Access Denied [page of 93 bytes]"
        );
    }
}
