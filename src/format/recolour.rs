//! Per-rectangle colours and full names, written into inferno's SVG.
//!
//! inferno colours by frame *name*: one colour per name over the whole
//! graph. In the wall view that misleads (a `start_thread` whose thread is
//! 99% on CPU would take the colour of the waiting majority elsewhere), so
//! each drawn rectangle is recoloured by its own on/off-CPU split, known
//! from [`super::drawn`]. inferno also strips the `_[k]`, `_[i]`, `_[j]`,
//! `_[w]` annotations from the names it shows; the tooltip (`<title>`,
//! which the search box matches) gets the full folded name back, so
//! `_[k]` finds kernel frames.
//!
//! A rectangle is found by its depth (from `y`) and its start (`fg:x`),
//! which together name exactly one drawn frame.

use rustc_hash::FxHashMap;

use super::drawn::Node;
use super::palette::{frame_colour, Lines, Scheme};

/// What inferno was asked to draw, for reading its rectangles back.
pub struct Layout {
    pub frame_height: usize,
    pub scheme: Scheme,
    pub shape: Lines,
}

/// Rewrites inferno's `svg`: fills by each rectangle's own split (in the
/// wall view), titles with annotations kept. Lines it does not recognise
/// are copied as they are.
pub fn recolour(svg: &str, nodes: &[Node<'_>], layout: &Layout) -> String {
    let by_place: FxHashMap<(u32, u64), &Node<'_>> =
        nodes.iter().map(|n| ((n.depth, n.x), n)).collect();
    // inferno writes every frame as `<g><title>…</title><rect …/><text>…`,
    // all on one line: each piece after a `<g><title>` is one frame.
    let mut pieces = svg.split(FRAME);
    let head = pieces.next().unwrap_or_default();
    let frames: Vec<&str> = pieces.collect();
    let Some(root_y) = frames
        .iter()
        .find(|f| f.starts_with("all ("))
        .and_then(|f| attr(f, " y=\""))
        .and_then(|y| y.parse::<i64>().ok())
    else {
        return svg.to_string();
    };
    let height = layout.frame_height.max(1) as i64;
    let mut out = String::with_capacity(svg.len() + svg.len() / 16);
    out.push_str(head);
    for f in frames {
        out.push_str(FRAME);
        let node = (|| {
            let y: i64 = attr(f, " y=\"")?.parse().ok()?;
            let x: u64 = attr(f, " fg:x=\"")?.parse().ok()?;
            let depth = ((y - root_y).abs() / height).checked_sub(1)?;
            by_place.get(&(u32::try_from(depth).ok()?, x)).copied()
        })();
        match node {
            Some(n) => out.push_str(&rewrite(f, n, layout)),
            None => out.push_str(f),
        }
    }
    out
}

const FRAME: &str = "<g><title>";

/// One frame (after its `<g><title>`) with `n`'s title and fill.
fn rewrite(frame_svg: &str, n: &Node<'_>, layout: &Layout) -> String {
    let leading = (n.depth as usize) < layout.shape.leading;
    let c = frame_colour(n.name, leading, layout.shape, layout.scheme, n.on, n.all);
    let mut text = frame_svg.to_string();
    if let Some(at) = text.find(" fill=\"rgb(") {
        let value = at + " fill=\"".len();
        if let Some(len) = text[value..].find('"') {
            text.replace_range(value..value + len, &format!("rgb({},{},{})", c.r, c.g, c.b));
        }
    }
    if annotated(n.name) {
        // The title is `NAME (COUNT UNIT, PCT%)`; NAME may hold " (".
        if let Some(end) = text.find("</title>").and_then(|e| text[..e].rfind(" (")) {
            text.replace_range(..end, &escape(n.name));
        }
    }
    text
}

/// Whether inferno strips an annotation from `name` (`_[k]` and the like).
fn annotated(name: &str) -> bool {
    name.len() > 4
        && name.ends_with(']')
        && name[name.len() - 4..].starts_with("_[")
        && "kwij".contains(&name[name.len() - 2..name.len() - 1])
}

/// The value of the attribute whose `name="` starts at the first match.
fn attr<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(name)? + name.len();
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// Escapes text for SVG/XML content and attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_inferno_strips() {
        assert!(annotated("vfs_read_[k]"));
        assert!(annotated("inl_[i]") && annotated("f_[w]") && annotated("g_[j]"));
        assert!(!annotated("_[k]") && !annotated("a_[x]") && !annotated("[sleeping]"));
    }

    #[test]
    fn attributes_are_read() {
        let l = r#"a (1 samples, 100%)</title><rect x="0%" y="61" fill="rgb(1,2,3)" fg:x="20" fg:w="10"/>"#;
        assert_eq!(attr(l, " y=\""), Some("61"));
        assert_eq!(attr(l, " fg:x=\""), Some("20"));
        assert_eq!(attr(l, " nope=\""), None);
    }
}
