//! Markdown → safe HTML, at export time (pulldown-cmark's parser, this module's writer).
//!
//! The writer is ours rather than pulldown-cmark's `push_html` so that nothing unsafe or
//! policy-breaking can reach the page: raw HTML in a message is shown as text (as pi shows it),
//! links keep only `http`, `https`, `mailto` and scheme-less targets (`javascript:`, `data:`,
//! `vbscript:`… become plain text), images are inlined only as `data:` URLs of raster types
//! (anything remote becomes a link: the page never loads a URL by itself), code blocks are
//! highlighted, and no element gets a `style` attribute (table alignment is dropped), so the
//! page's Content-Security-Policy holds. Line breaks inside a paragraph are kept, as chat text
//! is written.

use pulldown_cmark::{
    BlockQuoteKind, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd,
};

use super::highlight;
use super::html::{escape_into, is_base64, is_inline_image_mime};

fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_GFM
}

/// Append the HTML of `text` rendered as markdown.
pub fn render_into(out: &mut String, text: &str) {
    let mut w = Writer {
        out,
        links: Vec::new(),
        table_head: false,
        code: None,
        image: None,
    };
    for event in Parser::new_ext(text, options()) {
        w.event(event);
    }
}

/// A code block or raw HTML block being collected.
struct Code {
    lang: Option<&'static highlight::Lang>,
    label: String,
    raw_html: bool,
    text: String,
}

/// An image being collected: its target and alt text.
struct Image {
    url: String,
    alt: String,
}

struct Writer<'o> {
    out: &'o mut String,
    /// Per open link: whether an `<a>` was written (unsafe targets write none).
    links: Vec<bool>,
    table_head: bool,
    code: Option<Code>,
    image: Option<Image>,
}

/// Whether a link target is allowed: `http`, `https`, `mailto`, or no scheme at all (relative,
/// `#fragment`). Browsers ignore ASCII whitespace and control characters inside a scheme
/// (`java\tscript:`), so those are removed before looking.
pub fn safe_url(url: &str) -> bool {
    let cleaned: String = url
        .chars()
        .filter(|c| !c.is_ascii_whitespace() && !c.is_ascii_control())
        .take(64)
        .collect::<String>()
        .to_ascii_lowercase();
    let scheme_end = cleaned.find(|c: char| !(c.is_ascii_alphanumeric() || "+.-".contains(c)));
    match scheme_end {
        Some(i) if i > 0 && cleaned[i..].starts_with(':') => {
            matches!(&cleaned[..i], "http" | "https" | "mailto")
        }
        _ => true,
    }
}

/// A `data:` URL of a raster image with a plain base64 payload (safe to inline as `src`).
fn inline_image_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("data:") else {
        return false;
    };
    let Some((mime, data)) = rest.split_once(";base64,") else {
        return false;
    };
    is_inline_image_mime(mime) && is_base64(data)
}

fn heading(level: HeadingLevel) -> &'static str {
    // Message headings sit below the page's own h1/h2.
    match level {
        HeadingLevel::H1 => "h3",
        HeadingLevel::H2 => "h4",
        HeadingLevel::H3 => "h5",
        _ => "h6",
    }
}

impl Writer<'_> {
    fn event(&mut self, event: Event<'_>) {
        if let Some(code) = &mut self.code {
            match event {
                Event::End(TagEnd::CodeBlock | TagEnd::HtmlBlock) => {
                    let code = self.code.take();
                    if let Some(code) = code {
                        self.code_block(code);
                    }
                }
                Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) | Event::Code(t) => {
                    code.text.push_str(&t)
                }
                _ => {}
            }
            return;
        }
        if let Some(image) = &mut self.image {
            match event {
                Event::End(TagEnd::Image) => {
                    if let Some(image) = self.image.take() {
                        self.image(image);
                    }
                }
                Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                    image.alt.push_str(&t)
                }
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => escape_into(self.out, &t),
            Event::InlineMath(t) | Event::DisplayMath(t) | Event::FootnoteReference(t) => {
                escape_into(self.out, &t)
            }
            Event::Code(t) => {
                self.out.push_str("<code>");
                escape_into(self.out, &t);
                self.out.push_str("</code>");
            }
            Event::SoftBreak | Event::HardBreak => self.out.push_str("<br>\n"),
            Event::Rule => self.out.push_str("<hr>\n"),
            Event::TaskListMarker(done) => self.out.push_str(if done {
                "<span class=\"task done\">☑</span> "
            } else {
                "<span class=\"task\">☐</span> "
            }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let out = &mut *self.out;
        match tag {
            Tag::Paragraph => out.push_str("<p>"),
            Tag::Heading { level, .. } => {
                out.push('<');
                out.push_str(heading(level));
                out.push('>');
            }
            Tag::BlockQuote(kind) => out.push_str(match kind {
                None => "<blockquote>",
                Some(BlockQuoteKind::Note) => "<blockquote class=\"alert note\">",
                Some(BlockQuoteKind::Tip) => "<blockquote class=\"alert tip\">",
                Some(BlockQuoteKind::Important) => "<blockquote class=\"alert important\">",
                Some(BlockQuoteKind::Warning) => "<blockquote class=\"alert warning\">",
                Some(BlockQuoteKind::Caution) => "<blockquote class=\"alert caution\">",
            }),
            Tag::CodeBlock(kind) => {
                let info = match &kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some(Code {
                    lang: highlight::lang_for_fence(&info),
                    label: info
                        .split_whitespace()
                        .next()
                        .unwrap_or("")
                        .chars()
                        .take(24)
                        .collect(),
                    raw_html: false,
                    text: String::new(),
                });
            }
            Tag::HtmlBlock => {
                self.code = Some(Code {
                    lang: None,
                    label: String::new(),
                    raw_html: true,
                    text: String::new(),
                });
            }
            Tag::List(Some(start)) if start != 1 => {
                out.push_str("<ol start=\"");
                out.push_str(&start.to_string());
                out.push_str("\">\n");
            }
            Tag::List(Some(_)) => out.push_str("<ol>\n"),
            Tag::List(None) => out.push_str("<ul>\n"),
            Tag::Item => out.push_str("<li>"),
            Tag::Table(_) => out.push_str("<div class=\"tbl\"><table>"),
            Tag::TableHead => {
                self.table_head = true;
                out.push_str("<thead><tr>");
            }
            Tag::TableRow => out.push_str("<tr>"),
            Tag::TableCell => out.push_str(if self.table_head { "<th>" } else { "<td>" }),
            Tag::Emphasis => out.push_str("<em>"),
            Tag::Strong => out.push_str("<strong>"),
            Tag::Strikethrough => out.push_str("<del>"),
            Tag::Superscript => out.push_str("<sup>"),
            Tag::Subscript => out.push_str("<sub>"),
            Tag::Link {
                dest_url, title, ..
            } => {
                let ok = safe_url(&dest_url);
                if ok {
                    out.push_str("<a href=\"");
                    escape_into(out, &dest_url);
                    out.push('"');
                    if !title.is_empty() {
                        out.push_str(" title=\"");
                        escape_into(out, &title);
                        out.push('"');
                    }
                    out.push_str(" rel=\"noopener noreferrer nofollow\">");
                }
                self.links.push(ok);
            }
            Tag::Image { dest_url, .. } => {
                self.image = Some(Image {
                    url: dest_url.to_string(),
                    alt: String::new(),
                });
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => out.push_str("<div>"),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        let out = &mut *self.out;
        match tag {
            TagEnd::Paragraph => out.push_str("</p>\n"),
            TagEnd::Heading(level) => {
                out.push_str("</");
                out.push_str(heading(level));
                out.push_str(">\n");
            }
            TagEnd::BlockQuote(_) => out.push_str("</blockquote>\n"),
            TagEnd::CodeBlock | TagEnd::HtmlBlock => {}
            TagEnd::List(true) => out.push_str("</ol>\n"),
            TagEnd::List(false) => out.push_str("</ul>\n"),
            TagEnd::Item => out.push_str("</li>\n"),
            TagEnd::Table => out.push_str("</tbody></table></div>\n"),
            TagEnd::TableHead => {
                self.table_head = false;
                out.push_str("</tr></thead><tbody>\n");
            }
            TagEnd::TableRow => out.push_str("</tr>\n"),
            TagEnd::TableCell => out.push_str(if self.table_head { "</th>" } else { "</td>" }),
            TagEnd::Emphasis => out.push_str("</em>"),
            TagEnd::Strong => out.push_str("</strong>"),
            TagEnd::Strikethrough => out.push_str("</del>"),
            TagEnd::Superscript => out.push_str("</sup>"),
            TagEnd::Subscript => out.push_str("</sub>"),
            TagEnd::Link => {
                if self.links.pop() == Some(true) {
                    out.push_str("</a>");
                }
            }
            TagEnd::Image => {}
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => out.push_str("</div>"),
        }
    }

    fn code_block(&mut self, code: Code) {
        let out = &mut *self.out;
        if code.raw_html {
            out.push_str("<pre class=\"code raw\"><code>");
            escape_into(out, code.text.trim_end_matches('\n'));
            out.push_str("</code></pre>\n");
            return;
        }
        out.push_str("<pre class=\"code\"");
        if !code.label.is_empty() {
            out.push_str(" data-lang=\"");
            escape_into(out, &code.label);
            out.push('"');
        }
        out.push_str("><code>");
        let text = code.text.strip_suffix('\n').unwrap_or(&code.text);
        match code.lang {
            Some(lang) => highlight::highlight_into(out, text, lang),
            None => escape_into(out, text),
        }
        out.push_str("</code></pre>\n");
    }

    fn image(&mut self, image: Image) {
        let out = &mut *self.out;
        let alt = if image.alt.is_empty() {
            "image"
        } else {
            &image.alt
        };
        if inline_image_url(&image.url) {
            out.push_str("<img class=\"md-img\" src=\"");
            out.push_str(&image.url);
            out.push_str("\" alt=\"");
            escape_into(out, alt);
            out.push_str("\">");
        } else if safe_url(&image.url) && !image.url.starts_with("data:") {
            // Never fetched by the page: a link the reader may follow.
            out.push_str("<a class=\"md-img-link\" href=\"");
            escape_into(out, &image.url);
            out.push_str("\" rel=\"noopener noreferrer nofollow\">[image: ");
            escape_into(out, alt);
            out.push_str("]</a>");
        } else {
            out.push_str("[image: ");
            escape_into(out, alt);
            out.push(']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(s: &str) -> String {
        let mut out = String::new();
        render_into(&mut out, s);
        out
    }

    #[test]
    fn basics() {
        assert_eq!(
            md("# Title\n\nSome *em* and **strong**."),
            "<h3>Title</h3>\n<p>Some <em>em</em> and <strong>strong</strong>.</p>\n"
        );
        assert_eq!(md("a\nb"), "<p>a<br>\nb</p>\n");
        assert_eq!(
            md("- [x] done\n- [ ] todo"),
            "<ul>\n<li><span class=\"task done\">☑</span> done</li>\n<li><span class=\"task\">☐</span> todo</li>\n</ul>\n"
        );
        assert_eq!(md("3. three"), "<ol start=\"3\">\n<li>three</li>\n</ol>\n");
        assert_eq!(md("`<b>`"), "<p><code>&lt;b&gt;</code></p>\n");
    }

    #[test]
    fn tables_have_no_style_attributes() {
        let h = md("| a | b |\n|:--|--:|\n| 1 | 2 |");
        assert_eq!(
            h,
            "<div class=\"tbl\"><table><thead><tr><th>a</th><th>b</th></tr></thead><tbody>\n<tr><td>1</td><td>2</td></tr>\n</tbody></table></div>\n"
        );
    }

    #[test]
    fn raw_html_is_text() {
        let h = md("<script>alert(1)</script>\n\nx <img src=x onerror=alert(1)> </textarea>");
        assert!(!h.contains("<script"), "{h}");
        assert!(!h.contains("<img"), "{h}");
        assert!(!h.contains("</textarea>"), "{h}");
        assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{h}");
        assert!(h.contains("&lt;img src=x onerror=alert(1)&gt;"), "{h}");
    }

    #[test]
    fn dangerous_links_lose_their_href() {
        for src in [
            "[x](javascript:alert(1))",
            "[x](JaVaScRiPt:alert(1))",
            "[x](java\tscript:alert(1))",
            "<javascript:alert(1)>",
            "[x](data:text/html;base64,PHNjcmlwdD4=)",
            "[x](vbscript:msgbox)",
            "[x]( javascript:alert(1))",
            "[x](&#106;avascript:alert(1))",
            "[x](file:///etc/passwd)",
        ] {
            let h = md(src);
            assert!(!h.contains("<a"), "{src}: {h}");
        }
        let h = md("[ok](https://example.com/a?b=1&c=\"2\") [rel](src/lib.rs#L3) <mailto:a@b.c>");
        assert!(
            h.contains("<a href=\"https://example.com/a?b=1&amp;c=&quot;2&quot;\""),
            "{h}"
        );
        assert!(h.contains("<a href=\"src/lib.rs#L3\""), "{h}");
        assert!(h.contains("<a href=\"mailto:a@b.c\""), "{h}");
    }

    #[test]
    fn images_are_inline_only_as_data() {
        let h = md("![dot](data:image/png;base64,iVBORw0KGgo=)");
        assert!(
            h.contains(
                "<img class=\"md-img\" src=\"data:image/png;base64,iVBORw0KGgo=\" alt=\"dot\">"
            ),
            "{h}"
        );
        let h = md("![track](https://evil.example/p.png)");
        assert!(!h.contains("<img"), "{h}");
        assert!(h.contains("href=\"https://evil.example/p.png\""), "{h}");
        let h = md("![svg](data:image/svg+xml;base64,PHN2Zz4=)");
        assert!(!h.contains("<img") && !h.contains("<a"), "{h}");
        let h = md("![x\"onerror=\"y](javascript:alert(1))");
        assert!(!h.contains("<img") && !h.contains("<a"), "{h}");
    }

    #[test]
    fn code_blocks_are_highlighted_and_escaped() {
        let h = md("```rust\nfn main() { \"</script>\" }\n```");
        assert!(
            h.starts_with(
                "<pre class=\"code\" data-lang=\"rust\"><code><span class=\"hk\">fn</span>"
            ),
            "{h}"
        );
        assert!(h.contains("&lt;/script&gt;"), "{h}");
        let h = md("```\"><script>\nx\n```");
        assert!(h.contains("data-lang=\"&quot;&gt;&lt;script&gt;\""), "{h}");
        assert!(!h.contains("<script"), "{h}");
    }

    #[test]
    fn heading_attributes_are_not_parsed() {
        let h = md("# Title {#e-deadbeef .x}");
        assert!(!h.contains("id="), "{h}");
    }
}
