//! The source tree's shape, as the brief asks it: the pipeline flows one
//! way, so no module of `src/` imports, directly or through others, a
//! module that imports it back. Read from the code: every file is a module
//! (`a/mod.rs` is `a`, `a/b.rs` is `a::b`), and every path that begins at
//! `crate::`, `super::` or `self::` (in `use` lists too) leads to the
//! longest module its segments name, and a module leads to its children
//! (it holds them). A module's paths into its own ancestors (`super::Item`
//! in a child) are that tree itself, not an import back, and are left out;
//! so are comments and unit tests (`#[cfg(test)] mod`, at a file's end):
//! a test may drive its module through another that uses it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src/` (`lib.rs` is the crate root).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// `use` lists expanded into whole paths: `a::{b, c::{d, e}}` into
/// `a::b`, `a::c::d`, `a::c::e` (`self` in a list is its prefix).
fn expand(prefix: &str, list: &str, out: &mut Vec<String>) {
    let (mut depth, mut from) = (0, 0);
    let mut items = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&list[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    items.push(&list[from..]);
    for item in items.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let item = item.split(" as ").next().unwrap().trim();
        if let Some(open) = item.find('{') {
            let head = item[..open].trim_end_matches("::");
            let Some(close) = item.rfind('}') else { continue };
            let inner = &item[open + 1..close];
            expand(&join(prefix, head), inner, out);
        } else if item == "self" {
            out.push(prefix.to_string());
        } else {
            out.push(join(prefix, item));
        }
    }
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}::{b}"),
    }
}

/// The code of a file without its comments (line comments, and block
/// comments, which fgbpf's Rust does not nest) and its unit tests.
fn code(text: &str) -> String {
    let tests = Regex::new(r"(?m)^#\[cfg\(test\)\]\s*\n\s*mod\s").unwrap();
    let text = &text[..tests.find(text).map_or(text.len(), |m| m.start())];
    let blocks = Regex::new(r"(?s)/\*.*?\*/").unwrap();
    let text = blocks.replace_all(text, "");
    text.lines()
        .map(|l| match l.find("//") {
            // Not inside a string on that line (an even count of quotes
            // before it).
            Some(i) if l[..i].matches('"').count() % 2 == 0 => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a file names that begin at `crate`, `super` or `self`, made
/// absolute from `module`.
fn paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let uses = Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]*);").unwrap();
    let inline = Regex::new(r"\b(?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+").unwrap();
    let mut raw = Vec::new();
    for u in uses.captures_iter(code) {
        let list: String = u[1].split_whitespace().collect::<Vec<_>>().join(" ");
        expand("", &list, &mut raw);
    }
    raw.extend(inline.find_iter(code).map(|m| m.as_str().to_string()));
    let mut out = Vec::new();
    for p in raw {
        let segs: Vec<&str> = p.split("::").map(str::trim).collect();
        let mut abs: Vec<String> = module.to_vec();
        let mut rest = &segs[..];
        match segs.first() {
            Some(&"crate") => {
                abs.clear();
                rest = &segs[1..];
            }
            Some(&"super") => {
                while let Some(&"super") = rest.first() {
                    abs.pop();
                    rest = &rest[1..];
                }
            }
            Some(&"self") => rest = &segs[1..],
            _ => continue,
        }
        abs.extend(rest.iter().map(|s| s.to_string()));
        out.push(abs);
    }
    out
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    // The library's modules; main.rs is the binary, a crate of its own.
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| f.strip_prefix(&src).unwrap().to_path_buf())
        .filter(|r| r != Path::new("main.rs"))
        .map(|r| (module_of(&r), r))
        .collect();
    let mut edges: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> = BTreeMap::new();
    for module in modules.keys().filter(|m| !m.is_empty()) {
        if let Some((parent, _)) = modules.get_key_value(&module[..module.len() - 1]) {
            edges.entry(parent).or_default().insert(module);
        }
    }
    for (module, rel) in &modules {
        let text = std::fs::read_to_string(src.join(rel)).unwrap();
        for path in paths(module, &code(&text)) {
            // The longest module the path names.
            let target = (0..=path.len()).rev().find_map(|n| modules.get_key_value(&path[..n]).map(|(k, _)| k));
            let Some(target) = target else { continue };
            if target == module || module.starts_with(target) {
                continue;
            }
            edges.entry(module).or_default().insert(target);
        }
    }
    // Circles: the strongly connected components of more than one module
    // (Tarjan's, recursive: the tree is a few hundred modules deep at most).
    struct Walk<'a> {
        edges: &'a BTreeMap<&'a Vec<String>, BTreeSet<&'a Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        circles: Vec<Vec<&'a Vec<String>>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a Vec<String>) {
        let n = w.index.len();
        w.index.insert(v, (n, n));
        w.stack.push(v);
        w.on.insert(v);
        for &t in w.edges.get(v).into_iter().flatten() {
            if !w.index.contains_key(t) {
                visit(w, t);
                let low = w.index[t].1.min(w.index[v].1);
                w.index.get_mut(v).unwrap().1 = low;
            } else if w.on.contains(t) {
                let low = w.index[t].0.min(w.index[v].1);
                w.index.get_mut(v).unwrap().1 = low;
            }
        }
        if w.index[v].0 == w.index[v].1 {
            let mut circle = Vec::new();
            while let Some(t) = w.stack.pop() {
                w.on.remove(t);
                circle.push(t);
                if t == v {
                    break;
                }
            }
            if circle.len() > 1 {
                w.circles.push(circle);
            }
        }
    }
    let mut w = Walk { edges: &edges, index: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), circles: Vec::new() };
    for v in modules.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    let said: Vec<String> = w
        .circles
        .iter()
        .map(|c| {
            let names: BTreeSet<&Vec<String>> = c.iter().copied().collect();
            let ties: Vec<String> = names
                .iter()
                .flat_map(|&a| edges[a].iter().filter(|b| names.contains(*b)).map(move |b| format!("{} -> {}", a.join("::"), b.join("::"))))
                .collect();
            ties.join(", ")
        })
        .collect();
    assert!(said.is_empty(), "modules that import each other:\n{}", said.join("\n"));
    // The reading found the tree: edges between the pipeline's layers.
    let key = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
    assert!(
        edges.get(&key("app::capture")).is_some_and(|t| t.iter().any(|m| m.starts_with(&key("probe")))),
        "app::capture's imports of probe not seen"
    );
}
