//! Compiles each `src/bpf/<name>.bpf.c` and generates its libbpf-rs skeleton
//! as `$OUT_DIR/<name>.skel.rs`.
use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const PROGRAMS: &[&str] = &["fgbpf"];

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("CARGO_CFG_TARGET_ARCH is set by cargo");
    let vmlinux = PathBuf::from("vmlinux").join(&arch);
    if !vmlinux.join("vmlinux.h").exists() {
        panic!(
            "no vmlinux/{arch}/vmlinux.h: generate it on a {arch} machine with scripts/gen-vmlinux.sh (see docs/kernels.md, 'Other architectures')"
        );
    }
    let bpf_arch = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        "powerpc64" => "powerpc",
        "s390x" => "s390",
        "riscv64" => "riscv",
        other => other,
    };
    for name in PROGRAMS {
        let src = format!("src/bpf/{name}.bpf.c");
        SkeletonBuilder::new()
            .source(&src)
            // Kept for the checks of its code (src/probe/stack_depth.rs).
            .obj(out.join(format!("{name}.bpf.o")))
            .clang_args([
                format!("-I{}", vmlinux.display()),
                "-Isrc/bpf".to_string(),
                "-Isrc/runtimes".to_string(),
                format!("-D__TARGET_ARCH_{bpf_arch}"),
                "-Wall".to_string(),
            ])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building {src}: {e:#}"));
        println!("cargo:rerun-if-changed={src}");
    }
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=src/runtimes");
    println!("cargo:rerun-if-changed=vmlinux");
}
