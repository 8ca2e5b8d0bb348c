//! Java method names read out of a JVM: a `Method*` → its `ConstMethod` →
//! `ConstantPool` (name and signature Symbols by index) and the pool's
//! holder `Klass` (class name Symbol), each checked before it is believed,
//! and the text they make.
//!
//! Names are `pkg.Class.method`, without the signature: what async-profiler
//! prints by default, and what merges a method's overloads into one frame
//! of a flame graph. JFR (`jfr print`) adds `(long)`-style parameters;
//! [`MethodInfo::with_signature`] gives that form for whoever wants it.
//! Hidden classes (lambdas, `Busy$$Lambda$14/0x0000000800c01234`) keep
//! their Symbol name minus the `/0x...` address, which differs from run to
//! run and would split one lambda into as many frames as runs compared.
//! JFR sets no precedent here: it leaves hidden methods out of its stack
//! traces altogether (checked with JDK 17's `jfr print`: a lambda's
//! `applyAsLong` frame is absent, its `lambda$main$0` body is shown);
//! fgbpf keeps them, as the frames they are.

use super::stream::{line_for_bci, Coding};
use crate::procs::mem::Mem;

/// The ACC_NATIVE access flag, from the class file format (JVMS 4.6): the
/// JVM keeps it in Method::_access_flags as the class file gave it; not in
/// JDK 17's vmStructs constants, so fixed here.
const ACC_NATIVE: u32 = 0x0100;
/// Longest Symbol: its length is a u2.
const MAX_SYMBOL: u64 = 65535;
/// Longest line number table read.
const MAX_LINE_TABLE: u64 = 64 * 1024;
/// Methods of a class searched for the Method* being named.
const MAX_METHODS: u64 = 65536;

/// Offsets the method reader needs, from vmStructs.
#[derive(Clone, Copy, Debug, Default)]
pub struct MethodOffsets {
    pub m_const_method: u64,
    pub m_access_flags: u64,
    pub cm_constants: u64,
    pub cm_name_index: u64,
    pub cm_signature_index: u64,
    pub cm_code_size: u64,
    pub cm_flags: u64,
    pub cm_size_words: u64,
    pub cm_idnum: u64,
    pub cm_size: u64,
    /// ConstMethod::_has_linenumber_table; 0: lines are not read.
    pub cm_has_lines: u32,
    pub cp_holder: u64,
    pub cp_length: u64,
    pub cp_size: u64,
    pub klass_name: u64,
    pub ik_methods: u64,
    pub array_length: u64,
    pub array_data: u64,
    pub sym_length: u64,
    pub sym_body: u64,
}

/// What is kept of a method once read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodInfo {
    /// `java.lang.Thread`, hidden classes without their address.
    pub class: String,
    pub name: String,
    /// The JVM form, `(J)J`.
    pub signature: String,
    pub native: bool,
    /// The compressed line number table, copied (empty: none).
    lines: Vec<u8>,
}

impl MethodInfo {
    /// A method without a line table.
    pub fn new(class: &str, name: &str, signature: &str) -> MethodInfo {
        MethodInfo {
            class: class.into(),
            name: name.into(),
            signature: signature.into(),
            native: false,
            lines: Vec::new(),
        }
    }

    /// `pkg.Class.method`, fgbpf's frame name.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.class, self.name)
    }

    /// `pkg.Class.method(long, java.lang.String)`, as `jfr print` shows it.
    pub fn with_signature(&self) -> String {
        format!("{}{}", self.qualified(), pretty_signature(&self.signature))
    }

    /// The source line of a bci, from the line number table.
    pub fn line(&self, bci: u32, coding: Coding) -> Option<u32> {
        line_for_bci(&self.lines, bci, coding)
    }
}

fn symbol(mem: &Mem, o: &MethodOffsets, sym: u64) -> Option<String> {
    let len = mem.u16(sym.checked_add(o.sym_length)?)? as u64;
    if len > MAX_SYMBOL {
        return None;
    }
    let bytes = mem.bytes(sym + o.sym_body, len as usize)?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Reads a Method*: `None` when anything on the way is unreadable or not
/// what a Method's parts must be (an index out of its pool, a Method its
/// class does not list).
pub fn read_method(mem: &Mem, o: &MethodOffsets, method: u64) -> Option<MethodInfo> {
    if method == 0 || method % 8 != 0 {
        return None;
    }
    let cm = mem.u64(method + o.m_const_method)?;
    let cp = mem.u64(cm.checked_add(o.cm_constants)?)?;
    let holder = mem.u64(cp.checked_add(o.cp_holder)?)?;
    let cp_len = mem.i32(cp + o.cp_length)?;
    let name_index = mem.u16(cm + o.cm_name_index)? as i32;
    let sig_index = mem.u16(cm + o.cm_signature_index)? as i32;
    if cp_len <= 0 || name_index == 0 || name_index >= cp_len || sig_index == 0 || sig_index >= cp_len {
        return None;
    }
    // The class lists this Method (at its idnum, unless methods were
    // sorted or redefined since: then anywhere).
    let methods = mem.u64(holder.checked_add(o.ik_methods)?)?;
    let count = mem.i32(methods.checked_add(o.array_length)?)?;
    if count <= 0 || count as u64 > MAX_METHODS {
        return None;
    }
    let idnum = mem.u16(cm + o.cm_idnum)? as u64;
    let listed = (idnum < count as u64 && mem.u64(methods + o.array_data + idnum * 8) == Some(method)) || {
        let all = mem.bytes(methods + o.array_data, count as usize * 8)?;
        all.chunks_exact(8)
            .any(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) == method)
    };
    if !listed {
        return None;
    }
    let sym_at = |index: i32| mem.u64(cp + o.cp_size + index as u64 * 8);
    let name = symbol(mem, o, sym_at(name_index)?)?;
    let signature = symbol(mem, o, sym_at(sig_index)?)?;
    let class = class_name(&symbol(mem, o, mem.u64(holder + o.klass_name)?)?);
    let access = mem.u32(method + o.m_access_flags)?;
    let mut lines = Vec::new();
    if o.cm_has_lines != 0 && mem.u16(cm + o.cm_flags).is_some_and(|f| f as u32 & o.cm_has_lines != 0) {
        // The table follows the bytecodes, inside the ConstMethod.
        let start = cm + o.cm_size + mem.u16(cm + o.cm_code_size)? as u64;
        let end = cm + mem.i32(cm + o.cm_size_words)?.max(0) as u64 * 8;
        if end > start {
            lines = mem
                .bytes(start, (end - start).min(MAX_LINE_TABLE) as usize)
                .unwrap_or_default();
        }
    }
    Some(MethodInfo {
        class,
        name,
        signature,
        native: access & ACC_NATIVE != 0,
        lines,
    })
}

/// A class's Symbol name as Java spells it: `java/lang/Thread` →
/// `java.lang.Thread`; a hidden class's `/0x...` address suffix dropped.
pub fn class_name(symbol: &str) -> String {
    let base = match symbol.rfind("/0x") {
        Some(i) if i > 0 && symbol[i + 3..].bytes().all(|b| b.is_ascii_hexdigit()) => &symbol[..i],
        _ => symbol,
    };
    base.replace('/', ".")
}

/// `(JLjava/lang/String;[I)V` → `(long, java.lang.String, int[])`; the
/// input as it is when it is not a method descriptor.
pub fn pretty_signature(sig: &str) -> String {
    let Some(params) = sig.strip_prefix('(').and_then(|s| s.split(')').next()) else {
        return sig.to_string();
    };
    let mut out = Vec::new();
    let mut chars = params.chars();
    let mut dims = 0;
    while let Some(c) = chars.next() {
        let base = match c {
            '[' => {
                dims += 1;
                continue;
            }
            'B' => "byte".to_string(),
            'C' => "char".to_string(),
            'D' => "double".to_string(),
            'F' => "float".to_string(),
            'I' => "int".to_string(),
            'J' => "long".to_string(),
            'S' => "short".to_string(),
            'Z' => "boolean".to_string(),
            'L' => class_name(&chars.by_ref().take_while(|&c| c != ';').collect::<String>()),
            _ => return sig.to_string(),
        };
        out.push(format!("{base}{}", "[]".repeat(dims)));
        dims = 0;
    }
    format!("({})", out.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_use_dots_and_lose_hidden_addresses() {
        assert_eq!(class_name("java/lang/Thread"), "java.lang.Thread");
        assert_eq!(class_name("Busy"), "Busy");
        assert_eq!(class_name("Busy$$Lambda$14/0x0000000800c01234"), "Busy$$Lambda$14");
        assert_eq!(class_name("a/b/0xzz"), "a.b.0xzz", "not an address");
    }

    #[test]
    fn signatures_read_as_java() {
        assert_eq!(pretty_signature("(J)J"), "(long)");
        assert_eq!(pretty_signature("()V"), "()");
        assert_eq!(
            pretty_signature("(Ljava/lang/String;[I[[Ljava/lang/Object;Z)V"),
            "(java.lang.String, int[], java.lang.Object[][], boolean)"
        );
        assert_eq!(pretty_signature("garbage"), "garbage");
        assert_eq!(pretty_signature("(Q)V"), "(Q)V");
    }

    #[test]
    fn qualified_names() {
        let m = MethodInfo::new("Busy", "inner", "(J)J");
        assert_eq!(m.qualified(), "Busy.inner");
        assert_eq!(m.with_signature(), "Busy.inner(long)");
    }
}
