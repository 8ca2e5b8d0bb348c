//! fgbpf's SVGs in a real browser (Chromium, headless): the script inferno
//! embeds runs on what fgbpf wrote, and its search finds kernel frames by
//! the `_[k]` their tooltips keep.

mod common;

use std::process::Command;

use common::*;

/// Loads `svg` in headless Chromium with `probe` (JavaScript run 200 ms
/// after load, which sets `data-result` on the root) and returns that.
fn in_browser(svg: &std::path::Path, probe: &str) -> String {
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
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|e| panic!("running chromium (scripts/test.sh installs it): {e}"));
    let dom = String::from_utf8_lossy(&out.stdout);
    let at = dom
        .find("data-result=\"")
        .unwrap_or_else(|| panic!("the probe did not run: {}", String::from_utf8_lossy(&out.stderr)));
    let rest = &dom[at + 13..];
    rest[..rest.find('"').unwrap()].to_string()
}

#[test]
fn search_finds_kernel_frames_in_a_browser() {
    let dir = out_dir("browser");
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("oncpu.folded");
    std::fs::write(
        &input,
        "app-1;app-1;main;read;ksys_read_[k];copy_page_[k] 30\napp-1;app-1;main;compute 70\n",
    )
    .unwrap();
    let svg = dir.join("oncpu.svg");
    assert_ok(&run(fgbpf().arg("flamegraph").arg(&input).arg("-o").arg(&svg)));
    let result = in_browser(
        &svg,
        r##"search("_\\[k\\]");
var n = 0; var rects = document.querySelectorAll("#frames rect");
for (var i = 0; i < rects.length; i++) if (rects[i].getAttribute("fill") == searchcolor) n++;
document.documentElement.setAttribute("data-result", document.getElementById("matched").textContent + "; highlighted " + n);"##,
    );
    assert_eq!(result, "Matched: 30.0%; highlighted 2");
}
