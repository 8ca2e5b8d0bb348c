#!/usr/bin/env python3
"""Ruby structure offsets for fgbpf's Ruby walker, derived from a Ruby
version's own headers as bindgen translated them: rbspy's per-version
bindings (the `rbspy-ruby-structs` crate on crates.io,
src/ruby_X_Y_Z.rs). Writes src/runtimes/ruby/layouts.rs, one `Layout`
per version, which is checked in; run it again to add a version:

    scripts/ruby-offsets.py CRATE_SRC_DIR 2.7.4 3.1.2 3.3.8 > src/runtimes/ruby/layouts.rs

CRATE_SRC_DIR is the crate's src/ (e.g. after `cargo fetch` of a scratch
project depending on rbspy-ruby-structs = "=0.55.0", under
~/.cargo/registry/src/*/rbspy-ruby-structs-0.55.0/src).

The offsets are computed with C's layout rules (repr(C): each field at
its alignment, a struct padded to its largest alignment, a union as
large as its largest member) over the bindings' structs, unions and type
aliases. Some facts are not in the bindings, and are stated here with
the header they come from:
- Ruby 3.1's RClass and rb_classext_t (internal/class.h, not bound by
  rbspy for 3.1): `struct RClass { struct RBasic basic; VALUE super;
  struct rb_classext_struct *ptr; ... }` and `struct rb_classext_struct
  { struct st_table *iv_index_tbl; struct st_table *iv_tbl; ... }`.
  Ruby 2.7's (internal.h; rbspy binds its rb_classext_t, not its
  RClass) are the same: `struct RClass { struct RBasic basic; VALUE
  super; rb_classext_t *ptr; rb_serial_t class_serial; }`, as Debian
  11's ruby2.7-dev has it in rb_mjit_min_header-2.7.4.h.
- How many bits of an embedded RArray's flags hold its length
  (include/ruby/internal/core/rarray.h, RARRAY_EMBED_LEN_MASK; ruby.h
  in 2.7): RUBY_FL_USER3..4 before variable-width allocation (2.7, and
  3.1 as Debian builds it), RUBY_FL_USER3..9 from 3.2.
- How a 2.7 thread finds its execution context: not in TLS (3.0 on) but
  through the VM (`ruby_current_vm_ptr`), whose `living_threads` list
  links each rb_thread_t by its `vmlt_node`, with its `thread_id` (its
  pthread_t) and `ec`; all four are in the bindings.
The script also checks the offsets fgbpf's reader takes as fixed (an
iseq location's fields, the insns_info table's, RBasic's) and fails if a
version moved one of them.
"""

import re
import sys
from pathlib import Path

PRIM = {
    "u8": (1, 1), "i8": (1, 1), "bool": (1, 1),
    "u16": (2, 2), "i16": (2, 2),
    "u32": (4, 4), "i32": (4, 4), "f32": (4, 4),
    "u64": (8, 8), "i64": (8, 8), "f64": (8, 8),
    "u128": (16, 16), "i128": (16, 16),
    "usize": (8, 8), "isize": (8, 8),
    "c_char": (1, 1), "c_schar": (1, 1), "c_uchar": (1, 1),
    "c_short": (2, 2), "c_ushort": (2, 2),
    "c_int": (4, 4), "c_uint": (4, 4),
    "c_long": (8, 8), "c_ulong": (8, 8),
    "c_longlong": (8, 8), "c_ulonglong": (8, 8),
    "c_float": (4, 4), "c_double": (8, 8),
}

# Embedded RArray length bits (rarray.h), by (major, minor).
ARRAY_EMBED_LEN_BITS = {(2, 7): 2, (3, 1): 2, (3, 2): 7, (3, 3): 7, (3, 4): 7}

# Ruby 2.7's and 3.1's classes (internal.h, internal/class.h), not in
# rbspy's bindings of those versions (2.7's has rb_classext_t, kept).
CLASSES_31 = """
#[repr(C)]
pub struct RClass {
    pub basic: RBasic,
    pub super_: VALUE,
    pub ptr: *mut rb_classext_struct,
}
#[repr(C)]
pub struct rb_classext_struct {
    pub iv_index_tbl: *mut st_table,
    pub iv_tbl: *mut st_table,
}
"""


class Bindings:
    """The structs, unions and aliases of one bindings file."""

    def __init__(self, text):
        self.items = {}  # name -> ("struct"|"union", [(field, type)], packed, align)
        self.aliases = {}
        self.parse(text)
        self.memo = {}

    def parse(self, text):
        lines = text.split("\n")
        i = 0
        attrs = []
        while i < len(lines):
            line = lines[i].strip()
            if line.startswith("#["):
                attrs.append(line)
                i += 1
                continue
            m = re.match(r"pub (struct|union) (\w+)(<[^>]*>)? \{$", line)
            if m:
                fields = []
                i += 1
                while lines[i].strip() != "}":
                    # A field's type may span lines (a function pointer's
                    # parameters): joined until its brackets close.
                    field = lines[i].strip()
                    while field.count("<") - field.count("->") > field.count(">") or field.count("(") > field.count(")"):
                        i += 1
                        field += " " + lines[i].strip()
                    f = re.match(r"(?:pub )?(\w+): (.+),$", field)
                    if f:
                        fields.append((f.group(1), f.group(2)))
                    i += 1
                packed = any("packed" in a for a in attrs)
                align = 1
                for a in attrs:
                    am = re.search(r"align\((\d+)\)", a)
                    if am:
                        align = int(am.group(1))
                self.items[m.group(2)] = (m.group(1), fields, packed, align)
            m = re.match(r"pub type (\w+)(<[^>]*>)? =\s*(.*)$", line)
            if m:
                body = m.group(3)
                while not body.rstrip().endswith(";"):
                    i += 1
                    body += " " + lines[i].strip()
                self.aliases[m.group(1)] = body.rstrip()[:-1].strip()
            if line and not line.startswith("#["):
                attrs = []
            i += 1

    def size_align(self, ty):
        ty = ty.strip()
        if ty in self.memo:
            return self.memo[ty]
        r = self._size_align(ty)
        self.memo[ty] = r
        return r

    def _size_align(self, ty):
        if ty.startswith("*"):
            return (8, 8)
        if ty.startswith("::std::option::Option<") or ty.startswith("Option<"):
            return (8, 8)  # a nullable function pointer
        if ty.startswith("unsafe extern") or ty.startswith("extern"):
            return (8, 8)
        m = re.match(r"\[(.+); (\d+)(?:usize)?\]$", ty)
        if m:
            s, a = self.size_align(m.group(1))
            return (s * int(m.group(2)), a)
        m = re.match(r"__BindgenBitfieldUnit<\[u8; (\d+)usize\]>$", ty)
        if m:
            return (int(m.group(1)), 1)
        m = re.match(r"__IncompleteArrayField<(.+)>$", ty)
        if m:
            return (0, self.size_align(m.group(1))[1])
        if ty.startswith("::std::marker::PhantomData"):
            return (0, 1)
        base = ty.split("::")[-1]
        if base in PRIM:
            return PRIM[base]
        if base in self.aliases:
            return self.size_align(self.aliases[base])
        if base in self.items:
            return self.layout(base)[0]
        raise KeyError(f"unknown type {ty}")

    def layout(self, name):
        """((size, align), {field: (offset, type)})."""
        kind, fields, packed, min_align = self.items[name]
        off, align, offsets, size = 0, min_align, {}, 0
        for f, ty in fields:
            s, a = self.size_align(ty)
            if packed:
                a = 1
            align = max(align, a)
            if kind == "union":
                offsets[f] = (0, ty)
                size = max(size, s)
            else:
                off = (off + a - 1) // a * a
                offsets[f] = (off, ty)
                off += s
        if kind == "struct":
            size = off
        size = (size + align - 1) // align * align
        return ((size, align), offsets)

    def offset(self, name, path):
        """The offset of a dotted field path in struct `name`, and its type."""
        total, ty = 0, name
        for f in path.split("."):
            ty = self.struct_of(ty)
            off, fty = self.layout(ty)[1][f]
            total += off
            ty = fty
        return total, ty

    def struct_of(self, ty):
        ty = ty.strip().split("::")[-1]
        while ty in self.aliases and ty not in self.items:
            ty = self.aliases[ty].split("::")[-1]
        return ty

    def sizeof(self, ty):
        return self.size_align(ty)[0]


def first_of(b, *names):
    for n in names:
        if n in b.items or n in b.aliases:
            return n
    raise KeyError(f"none of {names}")


def derive(src, version):
    text = (src / f"ruby_{version.replace('.', '_')}.rs").read_text()
    major, minor = (int(x) for x in version.split(".")[:2])
    b = Bindings(text)
    if "RClass" not in b.items:
        if (major, minor) not in ((2, 7), (3, 1)):
            raise SystemExit(f"{version}: no RClass in the bindings")
        extra = Bindings(CLASSES_31)
        b.items.setdefault("RClass", extra.items["RClass"])
        b.items.setdefault("rb_classext_struct", extra.items["rb_classext_struct"])
    o = lambda s, p: b.offset(s, p)[0]
    ec = first_of(b, "rb_execution_context_struct")
    cfp = first_of(b, "rb_control_frame_struct")
    body = "rb_iseq_constant_body"
    me = first_of(b, "rb_callable_method_entry_struct", "rb_method_entry_struct")
    dfn = "rb_method_definition_struct"
    loc = first_of(b, "rb_iseq_location_struct")
    # What the reader takes as fixed (src/runtimes/ruby/iseq.rs): checked.
    fixed = {
        (loc, "pathobj"): 0, (loc, "base_label"): 8, (loc, "label"): 16, (loc, "first_lineno"): 24,
        ("rb_iseq_constant_body_iseq_insn_info", "body"): 0,
        ("rb_iseq_constant_body_iseq_insn_info", "size"): 16,
        ("rb_iseq_constant_body_iseq_insn_info", "succ_index_table"): 24,
        ("iseq_insn_info_entry", "line_no"): 0,
        ("RBasic", "flags"): 0, ("RBasic", "klass"): 8,
        (body, "type_"): 0,
        (me, "flags"): 0,
    }
    for (s, f), want in fixed.items():
        got = o(s, f)
        if got != want:
            raise SystemExit(f"{version}: {s}.{f} at {got}, fgbpf's reader takes {want}")
    first_ty = b.offset(loc, "first_lineno")[1].split("::")[-1]
    if first_ty not in ("VALUE", "c_int"):
        raise SystemExit(f"{version}: first_lineno is a {first_ty}")
    # RString: 3.1 keeps a heap string's length in the union (an embedded
    # one's in the flags); 3.2+ has a len field for both.
    string = b.layout("RString")[1]
    if "len" in string:
        str_len = string["len"][0]
        str_embed = o("RString", "as_") + o("RString__bindgen_ty_1", "embed")
        str_ptr = o("RString", "as_") + o("RString__bindgen_ty_1", "heap") + o("RString__bindgen_ty_1__bindgen_ty_1", "ptr")
    else:
        str_len = 0
        str_embed = o("RString", "as_")
        heap = "RString__bindgen_ty_1__bindgen_ty_1"
        if o(heap, "len") != 0:
            raise SystemExit(f"{version}: a heap string's len is not first")
        str_ptr = o("RString", "as_") + o(heap, "ptr")
    if "RClass_and_rb_classext_t" in b.items:
        # 3.2+: the classext follows the RClass in the same slot.
        ext = o("RClass_and_rb_classext_t", "classext")
        ext_s = "rb_classext_struct"
        classes = (
            f"ClassPath::Field {{ ext: {ext}, classpath: {o(ext_s, 'classpath')}, "
            f"attached: {o(ext_s, 'as_') + o('rb_classext_struct__bindgen_ty_1__bindgen_ty_2', 'attached_object')} }}"
        )
    else:
        classes = f"ClassPath::IvTable {{ ext_ptr: {o('RClass', 'ptr')}, iv_tbl: {o('rb_classext_struct', 'iv_tbl')} }}"
    # Where a thread's execution context is: 2.7's VM links its threads
    # (living_threads), 3.0+ keeps it in TLS (ruby_current_ec).
    vm_fields = b.layout("rb_vm_struct")[1]
    if "living_threads" in vm_fields:
        th = "rb_thread_struct"
        context = (
            f"Context::VmThreads {{ vm_threads: {o('rb_vm_struct', 'living_threads')}, "
            f"vm_main_thread: {o('rb_vm_struct', 'main_thread')}, th_node: {o(th, 'vmlt_node')}, "
            f"th_thread_id: {o(th, 'thread_id')}, th_ec: {o(th, 'ec')} }}"
        )
        if o("list_head", "n") != 0 or o("list_node", "next") != 0:
            raise SystemExit(f"{version}: a list's first node is not its first word")
    else:
        context = "Context::Tls"
    m = re.search(r"pub const ruby_method_ids_tLAST_OP_ID: ruby_method_ids = (\d+);", text)
    if not m:
        raise SystemExit(f"{version}: no tLAST_OP_ID")
    fields = [
        ("context", context),
        ("ec_vm_stack", o(ec, "vm_stack")),
        ("ec_stack_size", o(ec, "vm_stack_size")),
        ("ec_cfp", o(ec, "cfp")),
        ("ec_thread_ptr", o(ec, "thread_ptr")),
        ("cfp_size", b.sizeof(cfp)),
        ("cfp_pc", o(cfp, "pc")),
        ("cfp_iseq", o(cfp, "iseq")),
        ("cfp_ep", o(cfp, "ep")),
        ("iseq_body", o("rb_iseq_struct", "body")),
        ("body_size", o(body, "iseq_size")),
        ("body_encoded", o(body, "iseq_encoded")),
        ("body_location", o(body, "location")),
        ("body_insns_info", o(body, "insns_info")),
        ("me_def", o(me, "def")),
        ("me_owner", o(me, "owner")),
        ("def_body", o(dfn, "body")),
        ("def_original_id", o(dfn, "original_id")),
        ("body_local_iseq", o(body, "local_iseq")),
        ("insn_info_size", b.sizeof("iseq_insn_info_entry")),
        ("first_lineno_int", "true" if first_ty == "c_int" else "false"),
        ("str_len", str_len),
        ("str_embed", str_embed),
        ("str_ptr", str_ptr),
        ("array_embed_len_bits", ARRAY_EMBED_LEN_BITS[(major, minor)]),
        ("classes", classes),
        ("last_op_id", int(m.group(1))),
    ]
    return (major, minor), fields


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    src = Path(sys.argv[1])
    out = [
        "//! Ruby's structure offsets, one `Layout` per version: generated by",
        "//! scripts/ruby-offsets.py from rbspy-ruby-structs 0.55.0 (bindgen of",
        "//! each version's own headers); do not edit, run the script again.",
        "",
        "use super::{ClassPath, Context, Layout};",
        "",
    ]
    for version in sys.argv[2:]:
        (major, minor), fields = derive(src, version)
        out.append(f"/// Ruby {major}.{minor}, from ruby_{version.replace('.', '_')}.rs.")
        out.append(f"pub const LAYOUT_{major}{minor}: Layout = Layout {{")
        for name, value in fields:
            out.append(f"    {name}: {value},")
        out.append("};")
        out.append("")
    print("\n".join(out).rstrip())


if __name__ == "__main__":
    main()
