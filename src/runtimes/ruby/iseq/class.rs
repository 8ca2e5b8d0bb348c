//! The class a Ruby method belongs to, for names as Ruby's own profiling
//! API writes them (`Worker#run`, `Worker.crunch`, `block in Worker#run`):
//! the method entry's owner, and the owner's path, which Ruby 3.1 keeps in
//! the class's instance-variable table (`__classpath__`; a singleton
//! class's object is `__attached__`) and 3.2+ in its classext's
//! `classpath` (and `attached_object`) fields. Read from the target like the rest:
//! every object's type is checked, tables are capped, and a method entry
//! counts only when it is the entry of the iseq it came with; anything
//! that does not check out leaves the plain label.

use super::{Reader, FL_USHIFT, IMEMO_MENT, T_IMEMO, T_MASK};
use crate::runtimes::ruby::ClassPath;

const T_CLASS: u64 = 0x02;
const T_MODULE: u64 = 0x03;
/// RBasic flags: FL_USER0, a singleton class's mark.
const FL_SINGLETON: u64 = 1 << 12;
/// rb_method_definition_t's type (its low 4 bits): an iseq method.
const METHOD_TYPE_ISEQ: u32 = 0;
/// Most entries of an instance-variable table looked through.
const MAX_IVARS: u64 = 64;
/// st_table: num_entries, entries_start, entries_bound, entries; an
/// entry is (hash, key, record).
const ST_NUM: u64 = 16;
const ST_START: u64 = 32;
const ST_BOUND: u64 = 40;
const ST_ENTRIES: u64 = 48;
const ST_ENTRY: u64 = 24;

impl Reader {
    /// The qualified name of the method whose entry is `me`: for a C
    /// method (`iseq` None) named `name`; for a Ruby method, only when the
    /// entry's definition is the iseq `iseq`, named by the iseq.
    pub(crate) fn qualified(&mut self, me: u64, iseq: Option<u64>, name: &str) -> Option<String> {
        let mem = self.mem.as_ref()?;
        let l = self.layout;
        let flags = mem.u64(me)?;
        if flags & T_MASK != T_IMEMO || (flags >> FL_USHIFT) & 0xf != IMEMO_MENT {
            return None;
        }
        if let Some(iseq) = iseq {
            let def = mem.u64(me + u64::from(l.me_def))?;
            if mem.u32(def)? & 0xf != METHOD_TYPE_ISEQ || mem.u64(def + u64::from(l.def_body))? != iseq {
                return None;
            }
        }
        let owner = mem.u64(me + u64::from(l.me_owner))?;
        let (path, singleton) = self.class_path(owner)?;
        Some(format!("{path}{}{name}", if singleton { "." } else { "#" }))
    }

    /// A class's or module's path, and whether it is the singleton class
    /// of one (whose methods are `Path.name`); None for anonymous ones.
    pub(crate) fn class_path(&mut self, klass: u64) -> Option<(String, bool)> {
        let flags = self.mem.as_ref()?.u64(klass)?;
        let t = flags & T_MASK;
        if t != T_CLASS && t != T_MODULE {
            return None;
        }
        if let ClassPath::Field { ext, classpath, attached } = self.layout.classes {
            return self.field_path(klass, flags, u64::from(ext), u64::from(classpath), u64::from(attached));
        }
        if t == T_CLASS && flags & FL_SINGLETON != 0 {
            let of = self.ivar(klass, "__attached__")?;
            let of_flags = self.mem.as_ref()?.u64(of)?;
            // The singleton class of a class or module, not of an object.
            if !matches!(of_flags & T_MASK, T_CLASS | T_MODULE) || of_flags & FL_SINGLETON != 0 {
                return None;
            }
            let path = self.ivar(of, "__classpath__")?;
            return Some((self.string(path)?, true));
        }
        let path = self.ivar(klass, "__classpath__")?;
        Some((self.string(path)?, false))
    }

    /// 3.2+: the path in the class's classext (after the RClass), and a
    /// singleton's object in its `attached_object`. A temporary path
    /// (`#<Class:0x…>`, of a class not yet named or in an anonymous
    /// module) is no path.
    fn field_path(&self, klass: u64, flags: u64, ext: u64, classpath: u64, attached: u64) -> Option<(String, bool)> {
        let mem = self.mem.as_ref()?;
        let (of, singleton) = if flags & T_MASK == T_CLASS && flags & FL_SINGLETON != 0 {
            let of = mem.u64(klass + ext + attached)?;
            let of_flags = mem.u64(of)?;
            if !matches!(of_flags & T_MASK, T_CLASS | T_MODULE) || of_flags & FL_SINGLETON != 0 {
                return None;
            }
            (of, true)
        } else {
            (klass, false)
        };
        let path = self.string(mem.u64(of + ext + classpath)?)?;
        (!path.is_empty() && !path.starts_with("#<")).then_some((path, singleton))
    }

    /// The value of the instance variable `name` (an internal one) of a
    /// class: its st_table's entries, looked through by their keys' names.
    fn ivar(&mut self, klass: u64, name: &str) -> Option<u64> {
        let l = self.layout;
        let (ids, last) = self.symbols()?;
        let mem = self.mem.as_ref()?;
        let ClassPath::IvTable { ext_ptr, iv_tbl } = l.classes else { return None };
        let ext = mem.u64(klass + u64::from(ext_ptr))?;
        let table = mem.u64(ext + u64::from(iv_tbl))?;
        if table == 0 {
            return None;
        }
        let (num, start, bound) = (mem.u64(table + ST_NUM)?, mem.u64(table + ST_START)?, mem.u64(table + ST_BOUND)?);
        if num > MAX_IVARS || start > bound || bound - start > MAX_IVARS {
            return None;
        }
        let entries = mem.u64(table + ST_ENTRIES)?;
        let raw = mem.bytes(entries + start * ST_ENTRY, ((bound - start) * ST_ENTRY) as usize)?;
        let word = |e: &[u8], at: usize| u64::from_le_bytes(e[at..at + 8].try_into().expect("8 bytes"));
        raw.chunks_exact(ST_ENTRY as usize)
            .find(|e| self.id_name(ids, last, word(e, 8)).as_deref() == Some(name))
            .map(|e| word(e, 16))
    }
}
