//! fgbpf's SVGs in headless Chromium, for the tests that draw (tests/browser.rs)
//! and those that capture a real server (tests/servers.rs): a probe run
//! on the loaded picture, and the frames its bottom level shows.

/// Loads `svg` in headless Chromium with `probe` (JavaScript run 200 ms
/// after load, which sets `data-result` on the root) and returns that.
pub fn in_browser(svg: &std::path::Path, probe: &str) -> String {
    let text = std::fs::read_to_string(svg).unwrap();
    let end = text.rfind("</svg>").unwrap();
    let page = svg.with_extension("probe.svg");
    std::fs::write(
        &page,
        format!(
            "{}<script type=\"text/ecmascript\"><![CDATA[\nwindow.addEventListener(\"load\", function() {{ setTimeout(function() {{\ntry {{ {probe} }} catch (e) {{ document.documentElement.setAttribute(\"data-result\", \"error: \" + e); }}\n}}, 200); }});\n]]></script></svg>\n",
            &text[..end]
        ),
    )
    .unwrap();
    let out = super::dump_dom(&page, &["--virtual-time-budget=3000"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let at = dom
        .find("data-result=\"")
        .unwrap_or_else(|| panic!("the probe did not run: {}", String::from_utf8_lossy(&out.stderr)));
    let rest = &dom[at + 13..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// The frames standing on `all` in an inferno SVG, as the browser shows
/// them once inferno's script has fitted their labels: `[title, label]`.
const BOTTOM_FRAMES: &str = r##"
var gs = Array.from(document.querySelectorAll("#frames > g"));
var y = function (g) { return +g.querySelector("rect").getAttribute("y"); };
var all = Math.max.apply(null, gs.map(y));
var level = Math.max.apply(null, gs.map(y).filter(function (v) { return v < all; }));
var out = gs.filter(function (g) { return y(g) === level; }).map(function (g) {
  var t = g.querySelector("title").textContent;
  return [t.slice(0, t.indexOf(" (")), g.querySelector("text").textContent];
});
out.sort();
document.documentElement.setAttribute("data-result", JSON.stringify(out));"##;

pub fn bottom_frames(svg: &std::path::Path) -> Vec<(String, String)> {
    let json = in_browser(svg, BOTTOM_FRAMES).replace("&quot;", "\"");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

