//! HotSpot's layout and names as src/runtimes/java reads them, on a live JVM:
//! a busy Java program (tests/workloads/java/Busy.java, main → outer →
//! inner) runs until C2 has compiled it; the test finds libjvm.so in it,
//! checks the walker's layout against the process, walks the code cache
//! itself (segments → heap blocks → blobs) and names a frame word for
//! every nmethod and some stubs, as the BPF walker would have written
//! them. Needs root (it reads /proc/PID/mem) and OpenJDK 17.

mod common;

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::KillOnDrop;
use fgbpf::procs::frame_kind::FrameKind;
use fgbpf::runtimes::java::{self, word, Jvm, Layout, Unnamed};
use fgbpf::procs::maps;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const INSTALL: &str = "install openjdk-17-jdk-headless (scripts/test.sh does)";

fn tool(name: &str) -> String {
    let ok = Command::new(name)
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "`{name}` is missing or broken: {INSTALL}");
    name.to_string()
}

/// Compiles Busy.java into a temporary directory and starts it.
fn start_busy(dir: &Path) -> KillOnDrop {
    let src = Path::new(ROOT).join("tests/workloads/java/Busy.java");
    let javac = tool("javac");
    let out = Command::new(javac).arg("-d").arg(dir).arg(&src).output().unwrap();
    assert!(out.status.success(), "javac: {}", String::from_utf8_lossy(&out.stderr));
    common::runtime::start_ready(
        Command::new(tool("java")).arg("-cp").arg(dir).arg("Busy").arg("60"),
        "Busy",
        INSTALL,
    )
}

/// The JVM in `pid`, from its executable libjvm.so mapping.
fn find_jvm(pid: u32) -> Jvm {
    let text = maps::read(pid).expect("maps");
    let m = text
        .lines()
        .filter_map(maps::parse_line)
        .find(|m| m.exec && java::may_be_jvm(m.path))
        .expect("no libjvm.so mapped executable");
    let file = File::open(format!("/proc/{pid}/root{}", m.path)).unwrap();
    match java::find(pid, &file, m.path, m.start, m.offset) {
        Ok(Some(jvm)) => jvm,
        Ok(None) => panic!("{} is not HotSpot", m.path),
        Err(e) => panic!("unsupported: {e}"),
    }
}

fn check_layout(l: &Layout) {
    assert!(l.code_lo != 0 && l.code_lo < l.code_hi, "{l:#x?}");
    assert!((1..=4).contains(&l.nheaps), "{l:#x?}");
    for h in 0..l.nheaps as usize {
        assert!(
            l.code_lo <= l.heap_lo[h] && l.heap_lo[h] < l.heap_hi[h] && l.heap_hi[h] <= l.code_hi,
            "{l:#x?}"
        );
        assert!(l.segmap[h] != 0, "{l:#x?}");
    }
    let inside = |a: u64| l.code_lo <= a && a < l.code_hi;
    assert!(
        inside(l.interp_lo) && l.interp_lo < l.interp_hi && l.interp_hi <= l.code_hi,
        "{l:#x?}"
    );
    assert!(inside(l.call_stub_ra), "{l:#x?}");
    assert!(l.name_nmethod != 0, "no nmethod found for its name: {l:#x?}");
    assert_eq!(l.major, 17);
    assert_eq!(l.heap_block_size, 16);
    assert!((5..=8).contains(&l.log2_seg), "{l:#x?}");
    assert_eq!(l.flags, 0, "JDK 17: pointers, no kind, int frame-complete offset");
    for off in [
        l.cb_name,
        l.cb_frame_size,
        l.cb_frame_complete,
        l.cb_code_begin,
        l.cb_code_end,
        l.nm_compile_id,
        l.nm_entry,
        l.nm_verified_entry,
        l.nm_osr_entry,
        l.nm_deopt_handler,
        l.nm_orig_pc_offset,
    ] {
        assert!(off < 384, "an offset past the walker's head: {l:#x?}");
    }
    assert_eq!(l.cb_kind, 0xffff);
}

/// Every used blob of the code cache: (blob, is an nmethod).
fn blobs(jvm: &Jvm, l: &Layout) -> Vec<(u64, bool)> {
    let mem = jvm.mem();
    let seg = 1u64 << l.log2_seg;
    let mut out = Vec::new();
    for h in 0..l.nheaps as usize {
        let mut block = l.heap_lo[h];
        // HeapBlock::Header (JDK 17): size_t _length in segments, bool _used.
        while block < l.heap_hi[h] {
            let (Some(len), Some(used)) = (mem.u64(block), mem.u8(block + 8)) else {
                break;
            };
            if len == 0 {
                break;
            }
            let blob = block + l.heap_block_size as u64;
            if used != 0 {
                let name = mem.u64(blob + l.cb_name as u64).unwrap_or(0);
                out.push((blob, name == l.name_nmethod));
            }
            block += len * seg;
        }
    }
    out
}

#[test]
fn a_live_jvm_reads_and_names_its_frames() {
    let dir = tempfile::tempdir().unwrap();
    let busy = start_busy(dir.path());
    std::thread::sleep(Duration::from_secs(3));
    let pid = busy.id();
    let mut jvm = find_jvm(pid);
    assert_eq!(jvm.major(), 17);
    let l = jvm.layout();
    check_layout(&l);
    eprintln!("layout: {l:#x?}");

    let all = blobs(&jvm, &l);
    let nmethods: Vec<u64> = all.iter().filter(|b| b.1).map(|b| b.0).collect();
    assert!(
        nmethods.len() > 5,
        "{} nmethods among {} blobs",
        nmethods.len(),
        all.len()
    );

    // Every nmethod: read as announced, then named at each pc a walker
    // could record (every 4 bytes of its code).
    let mut chains = BTreeSet::new();
    let mut methods = Vec::new();
    let mut named = 0;
    for &blob in &nmethods {
        let Some(id) = jvm.mem().u32(blob + l.nm_compile_id as u64) else {
            continue;
        };
        jvm.read_nmethod(blob, id);
        let begin = jvm.mem().u64(blob + l.cb_code_begin as u64).unwrap();
        let end = jvm.mem().u64(blob + l.cb_code_end as u64).unwrap();
        assert!(
            blob < begin && begin <= end && end - blob < 1 << 24,
            "{blob:#x}: code {begin:#x}-{end:#x}"
        );
        for pc in (begin..end).step_by(4) {
            let w = word::blob_word(&l, word::Kind::Compiled, blob, pc, id);
            assert_eq!(word::word_blob(&l, w), Some(blob));
            match jvm.name(w) {
                Ok(frames) => {
                    named += 1;
                    assert!(!frames.is_empty());
                    chains.insert(
                        frames
                            .iter()
                            .map(|f| {
                                format!(
                                    "{}[{:?}{}]",
                                    f.name,
                                    f.kind,
                                    f.line.map_or(String::new(), |n| format!(":{n}"))
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(" > "),
                    );
                }
                Err(e) => panic!("{blob:#x}+{:#x}: {e}", pc - blob),
            }
        }
        // A word of the same blob with another compile id: never announced
        // it is unnamed as such; announced, the read finds another nmethod
        // there and it is counted as freed.
        let stale = word::blob_word(&l, word::Kind::Compiled, blob, begin, id + 1);
        assert_eq!(jvm.name(stale), Err(Unnamed::NotAnnounced));
        jvm.read_nmethod(blob, id + 1);
        assert_eq!(jvm.name(stale), Err(Unnamed::Freed));
        assert!(jvm.name(word::blob_word(&l, word::Kind::Compiled, blob, begin, id)).is_ok());
        methods.extend(jvm.nmethod_method(blob));
    }
    eprintln!("{named} compiled words named; chains:");
    for c in &chains {
        eprintln!("  {c}");
    }
    assert!(
        chains.iter().any(|c| c.contains("Busy.inner[")),
        "no nmethod names Busy.inner"
    );
    // C2 inlines inner into outer (or outer into main's OSR nmethod).
    let inlined = chains.iter().any(|c| {
        c.contains("Busy.inner[Inlined") && (c.contains("Busy.outer[Jit") || c.contains("Busy.outer[Inlined"))
    });
    assert!(inlined, "Busy.inner never inlined under Busy.outer");
    assert!(chains.iter().all(|c| !c.contains("unknown Java method")));

    // An interpreted frame of a method some nmethod compiled.
    let mut busy_interpreted = Vec::new();
    for m in methods {
        jvm.read_method(m);
        let frames = jvm.name(word::interpreted_word(m, Some(0))).expect("interpreted word");
        assert_eq!(frames.len(), 1);
        if frames[0].name.starts_with("Busy.") {
            busy_interpreted.push(frames[0].clone());
        }
    }
    eprintln!("interpreted: {busy_interpreted:?}");
    assert!(!busy_interpreted.is_empty(), "no Busy.* method read from an nmethod");
    assert!(busy_interpreted
        .iter()
        .all(|f| f.kind == FrameKind::Interpreted && f.line.is_some()));
    // A Method* never announced, and garbage.
    assert_eq!(
        jvm.name(word::interpreted_word(0x1000, None)),
        Err(Unnamed::NotAnnounced)
    );
    jvm.read_method(0x1000);
    assert_eq!(jvm.name(word::interpreted_word(0x1000, None)), Err(Unnamed::Unreadable));
    assert_eq!(jvm.name(0x7fff_0000_1234), Err(Unnamed::BadWord));

    // Stubs: named by their CodeBlob's name.
    let mut stubs = BTreeSet::new();
    for &(blob, _) in all.iter().filter(|b| !b.1).take(200) {
        jvm.read_stub(blob);
        let w = word::blob_word(&l, word::Kind::Stub, blob, blob + 64, 0);
        let f = jvm.name(w).expect("stub word");
        // A stub is the JVM's native code (User); a native method's
        // wrapper is JIT code.
        assert!(matches!(f[0].kind, FrameKind::User | FrameKind::Jit), "{f:?}");
        assert_ne!(f[0].name, "native nmethod", "a native wrapper names its method");
        stubs.insert(format!("{}[{:?}]", f[0].name, f[0].kind));
    }
    eprintln!("stubs: {stubs:?}");
    assert!(stubs.contains("Interpreter[User]"), "{stubs:?}");
    assert!(stubs.iter().any(|s| s.starts_with("StubRoutines")), "{stubs:?}");
    drop(busy);
}
