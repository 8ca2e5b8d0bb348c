//! `timeline.html`: one self-contained, FlameScope-style page (issue 16).
//! A subsecond-offset heat map of the capture (columns of about a second,
//! a row per time slice within it, colour the weight in the slice; in a
//! wall-clock capture the on-CPU, the off-CPU or all of it), a
//! thread and process selection that recolours it, and the flamegraph of
//! any range dragged out on it (search, click to zoom; standing on
//! programs, processes or threads), the whole capture's on load.
//!
//! This module owns the page: its options, what it reports to the caller
//! (how much the cap on embedded stacks left out), and its assembly from
//! pieces embedded at build time: the data as escaped JSON
//! ([`data`]), the page's own script and style (`page.js`, `page.css`), and
//! d3 and d3-flame-graph, vendored unchanged in `vendor/` (see its README
//! for versions and licenses). The page needs no network: a
//! Content-Security-Policy forbids every fetch, and names are put into the
//! DOM only as text.
//!
//! Size and time, measured on the synthetic 200k-stack profile of
//! `tests::two_hundred_thousand_stacks` (10 threads, 12 random frames of
//! 2,000 a stack, 1 to 3 one-slice spans each, 600 slices; release build
//! on a 2-CPU VM under load): 19.0 MB, written in 0.33 to 0.8 s. Headless
//! Chromium has run the page's scripts 3.7 s after opening it, and redraws
//! a range's flamegraph in about 0.8 s (random stacks share little: 2.2
//! million distinct paths). Drawn by program or process rather than by
//! thread, the page first sorts its stacks by those roots' paths, once
//! per choice: 0.8 s for 200k such stacks in Node.js on the same VM.

mod data;

use std::io::{self, Write};

use super::palette::Heat;
use crate::profile::names::Leading;
use crate::profile::Profile;

const D3: &str = include_str!("vendor/d3-7.9.0.min.js");
const FLAMEGRAPH: &str = include_str!("vendor/d3-flame-graph-5.0.0.umd.min.js");
const D3_LICENSE: &str = include_str!("vendor/LICENSE-d3");
const FLAMEGRAPH_LICENSE: &str = include_str!("vendor/LICENSE-d3-flame-graph");
const SCRIPT: &str = include_str!("page.js");
const STYLE: &str = include_str!("page.css");

#[derive(Clone, Debug)]
pub struct Options {
    pub title: String,
    pub subtitle: Option<String>,
    /// Whether the frames' time was spent running or waiting: picks their
    /// colours ([`super::palette::color`]).
    pub heat: Heat,
    /// What the flamegraph stands on when the page opens: programs,
    /// processes or threads (the page switches among them).
    pub roots: Leading,
    /// At most this many stacks are embedded, the heaviest.
    pub max_stacks: usize,
    /// Stacks stop being embedded once the data reaches about this many
    /// bytes of JSON.
    pub max_data_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            title: "Timeline".into(),
            subtitle: None,
            heat: Heat::OnCpu,
            roots: Leading::ProcessAndThread,
            max_stacks: 200_000,
            max_data_bytes: 50 << 20,
        }
    }
}

/// What a written page holds of the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Stacks embedded.
    pub stacks: usize,
    /// Stacks left out by the caps, the lightest.
    pub left_out_stacks: usize,
    /// Their weight, in the profile's unit; the page says it too.
    pub left_out_weight: u64,
    /// The profile's weight, all stacks.
    pub total_weight: u64,
    /// Slices the heat map shows; 0 when the profile has no time (the page
    /// then shows the whole capture's flamegraph only).
    pub slices: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Counts what goes through.
struct Counted<'a> {
    out: &'a mut dyn Write,
    bytes: u64,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Writes the page. Its text other than the data is fixed: the title and
/// subtitle travel in the data, like every other name.
pub fn write(profile: &Profile, opts: &Options, out: &mut dyn Write) -> io::Result<Written> {
    let data = data::build(profile, opts);
    let mut out = Counted { out, bytes: 0 };
    let head = serde_json::json!({
        "title": opts.title,
        "subtitle": opts.subtitle,
        "kind": format!("{:?}", profile.meta.kind),
        "target": profile.meta.target,
    });
    out.write_all(
        b"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>fgbpf timeline</title>\n<!--\n",
    )?;
    write!(
        out,
        "Written by fgbpf. It embeds, unchanged, two JavaScript libraries under\n\
these licenses:\n\n\
d3 7.9.0 (https://d3js.org), ISC license:\n\n{D3_LICENSE}\n\n\
d3-flame-graph 5.0.0 (https://github.com/spiermar/d3-flame-graph,\n\
Copyright Martin Spier), Apache License 2.0:\n\n{FLAMEGRAPH_LICENSE}\n-->\n"
    )?;
    write!(out, "<style>\n{STYLE}</style>\n</head>\n<body>\n")?;
    out.write_all(BODY.as_bytes())?;
    out.write_all(b"<script type=\"application/json\" id=\"fgbpf-head\">")?;
    data::write_escaped(head.to_string().as_bytes(), &mut out)?;
    out.write_all(b"</script>\n<script type=\"application/json\" id=\"fgbpf-data\">")?;
    data.write(&mut out)?;
    out.write_all(b"</script>\n")?;
    write!(
        out,
        "<script>\n{D3}\n</script>\n<script>\n{FLAMEGRAPH}\n</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n"
    )?;
    out.flush()?;
    Ok(Written {
        stacks: data.kept_stacks,
        left_out_stacks: data.left_out_stacks,
        left_out_weight: data.left_out_weight,
        total_weight: data.total_weight,
        slices: data.slices,
        bytes: out.bytes,
    })
}

/// The page's elements; `page.js` fills them.
const BODY: &str = r#"<header>
<h1 id="title"></h1>
<p id="subtitle"></p>
<p id="about"></p>
<p id="left-out" hidden></p>
</header>
<section id="controls">
<label>Threads: <select id="threads"></select></label>
<label id="measure-label" hidden>Colour the heat map by: <select id="measure"></select></label>
<label>Flamegraph by: <select id="roots"></select></label>
<span id="hover" class="status"></span>
</section>
<section id="map-section">
<p id="map-about"></p>
<div id="map"></div>
<p id="legend" class="status"></p>
</section>
<section id="flame-section">
<div id="range-bar">
<span id="range"></span>
<button id="whole" type="button">Whole capture</button>
</div>
<div id="flame-bar">
<label>Search: <input id="search" type="search" placeholder="part of a frame name" size="30"></label>
<button id="clear" type="button">Clear</button>
<button id="reset" type="button">Reset zoom</button>
<span id="matched" class="status"></span>
</div>
<p id="flame-about" class="status">Click a frame to zoom in on it. Frames narrower than 0.002% of the range are not drawn.</p>
<p id="empty" hidden></p>
<div id="chart"></div>
<p id="details" class="status"></p>
</section>
<noscript><p>This page draws with JavaScript, which is off.</p></noscript>
"#;

#[cfg(test)]
mod tests;
