//! What the runtimes read in a capture and what they could not, put
//! together in the order of their list for the summary and the report:
//! the processes whose frames were read, and the lines that say it.

use super::java::walks::JavaWalks;
use super::v8::walks::NodeWalks;
use super::walks::{by_process, lines, Context};
use super::{go, luajit, perl, php, python, ruby};
use super::Found;
use crate::profile::names::printable;
use crate::profile::unwinding::RuntimeWalks;

/// What the runtimes read and could not, in the order of their list: the
/// processes whose frames were read, and the lines that say it.
pub fn of(found: &Found, ctx: &Context) -> RuntimeWalks {
    let mut out = RuntimeWalks::default();
    for (lang, otlp, read, unsupported) in [
        (&python::walker::LANG, "cpython", &found.interpreters, &found.py_unsupported),
        (&ruby::walker::LANG, "ruby", &found.rubies, &found.rb_unsupported),
        (&php::walker::LANG, "php", &found.phps, &found.php_unsupported),
        (&perl::walker::LANG, "perl", &found.perls, &found.perl_unsupported),
        (&luajit::walker::LANG, "luajit", &found.luajits, &found.luajit_unsupported),
    ] {
        let versions = read.iter().map(|(pid, v, _)| (*pid, format!("{}.{}", v.0, v.1))).collect();
        let walks = by_process(ctx.weighed.iter().copied(), &versions, ctx.name_of);
        out.processes.extend(walks.iter().map(|w| (w.pid, otlp)));
        out.lines.extend(lines(&walks, &ctx.unreadable(unsupported), lang));
        for (pid, _, note) in found.notes.iter().filter(|n| n.1 == lang.name) {
            out.lines.push(format!("{}: pid {pid} ({}): {note}", lang.name, printable(&ctx.process(*pid))));
        }
    }
    let java = JavaWalks::of(found, ctx);
    out.processes.extend(java.jvms.iter().map(|j| (j.0, "jvm")));
    out.lines.extend(java.lines());
    let node = NodeWalks::of(found, ctx);
    out.processes.extend(node.processes.iter().map(|n| (n.0, "v8js")));
    out.lines.extend(node.lines());
    out.processes.extend(found.beams.iter().map(|b| (b.pid, "beam")));
    out.lines.extend(super::beam::walker::lines(found, ctx));
    for (pid, why) in &found.go_unsupported {
        out.lines.push(format!("goroutines of {} (pid {pid}) not read: {why}", printable(&ctx.process(*pid))));
    }
    for (pid, _, note) in found.notes.iter().filter(|n| n.1 == go::walker::LANG.name) {
        out.lines.push(format!("Go: pid {pid} ({}): {note}", printable(&ctx.process(*pid))));
    }
    let versions = found.gos.iter().map(|(pid, v)| (*pid, v.trim_start_matches("go").to_string())).collect();
    let go = by_process(ctx.weighed.iter().copied(), &versions, ctx.name_of);
    out.lines.extend(lines(&go, &ctx.unreadable(&found.go_labels_unsupported), &go::walker::LANG));
    for (&pid, &(on, off)) in &found.go_labels_unread {
        let Some(all) = go.iter().find(|w| w.pid == pid).map(|w| w.total) else { continue };
        let unread = on * ctx.period_us + off;
        let pct = unread as f64 * 100.0 / all.max(1) as f64;
        out.lines.push(format!(
            "Go: pid {pid} ({}): the pprof labels of {pct:.1}% of its time not read: freed before fgbpf read them (labels made and dropped within milliseconds), or their announcement lost",
            printable(&ctx.process(pid))
        ));
    }
    out
}

