//! The layouts of the LuaJITs fgbpf reads (x86-64): offsets into their
//! structures, taken from each version's own headers (`offsetof` over
//! lj_obj.h, lj_dispatch.h, lj_jit.h and lj_frame.h, as
//! docs/runtimes/luajit.md says): OpenResty's 2.1 (GC64: 64-bit
//! references, two-slot frames) and LuaJIT's own 2.1.0-beta3 as Debian 11
//! builds it (not GC64: 32-bit references, one-slot frames). Checked on
//! the live library by tests/luajit.rs and the BPF walker (a GG_State's
//! main lua_State points back at its global_State).

/// Offsets into one LuaJIT version's structures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// GC64: references (GCRef, MRef) of 8 bytes and frames of two
    /// slots; else references of 4 bytes and frames of one slot.
    pub gc64: bool,
    /// GG_State: dispatch (where DISPATCH, r14, points) and g.
    pub gg_dispatch: u16,
    pub gg_g: u16,
    /// lua_State: glref, base, maxstack, stack.
    pub l_glref: u16,
    pub l_base: u16,
    pub l_maxstack: u16,
    pub l_stack: u16,
    /// global_State: vmstate, cur_L, jit_base (read together with cur_L:
    /// it must follow it).
    pub g_vmstate: u16,
    pub g_cur_l: u16,
    pub g_jit_base: u16,
    /// global_State: mainthref (the main lua_State, at the GG_State's
    /// start).
    pub g_mainthref: u16,
    /// GCfunc: ffid, pc.
    pub fn_ffid: u16,
    pub fn_pc: u16,
    /// GCproto: its size (its bytecode follows), sizebc, k, chunkname,
    /// firstline, numline, lineinfo, uvinfo, sizeuv.
    pub pt_size: u16,
    /// lua_State: cframe; GG_State: J - g; jit_State: trace; GCtrace:
    /// mcode, szmcode.
    pub l_cframe: u16,
    pub g_to_j: u16,
    pub j_trace: u16,
    pub t_mcode: u16,
    pub t_szmcode: u16,
    pub pt_sizebc: u16,
    pub pt_k: u16,
    pub pt_chunkname: u16,
    pub pt_firstline: u16,
    pub pt_numline: u16,
    pub pt_lineinfo: u16,
    pub pt_uvinfo: u16,
    pub pt_sizeuv: u16,
    /// Every GC object's type byte (GCHeader's gct), GCstr's len and size
    /// (its text follows), and the types ~LJ_TSTR, ~LJ_TPROTO.
    pub gct: u16,
    pub str_len: u16,
    pub str_size: u16,
    pub t_str: u8,
    pub t_proto: u8,
}

/// OpenResty's LuaJIT 2.1 (v2.1-20230119, Debian 12's libluajit2-5.1-2).
pub const LAYOUT_OPENRESTY_21: Layout = Layout {
    gc64: true,
    gg_dispatch: 4120,
    gg_g: 112,
    l_glref: 16,
    l_base: 32,
    l_maxstack: 48,
    l_stack: 56,
    g_vmstate: 184,
    g_cur_l: 368,
    g_jit_base: 376,
    g_mainthref: 192,
    fn_ffid: 10,
    fn_pc: 32,
    pt_size: 104,
    l_cframe: 80,
    g_to_j: 736,
    j_trace: 384,
    t_mcode: 88,
    t_szmcode: 84,
    pt_sizebc: 12,
    pt_k: 32,
    pt_chunkname: 64,
    pt_firstline: 72,
    pt_numline: 76,
    pt_lineinfo: 80,
    pt_uvinfo: 88,
    pt_sizeuv: 60,
    gct: 9,
    str_len: 20,
    str_size: 24,
    t_str: 4,
    t_proto: 7,
};

/// LuaJIT 2.1.0-beta3 as Debian 11 builds it (2.1.0~beta3+dfsg-5.3, not
/// GC64; luajit and libluajit-5.1-2): the offsets over the headers of
/// Debian's luajit_2.1.0~beta3+dfsg.orig.tar.gz for x86-64, but for two.
/// Debian's patches (its debian.tar.xz, which this machine's mirror does
/// not serve) make global_State.gc 4 bytes longer: `vmstate` and
/// `mainthref` were measured 4 bytes later on the live process (`vmstate`
/// the running trace's number, then -1 in the interpreter; `mainthref`
/// the main lua_State, which `tmpbuf.L` before it also holds), and the
/// fields from `registrytv` on, past the padding that absorbs them, where
/// the headers put them (`cur_L` the running lua_State, `panic` and
/// `bc_cfunc_int` where they say).
pub const LAYOUT_BETA3: Layout = Layout {
    gc64: false,
    gg_dispatch: 3176,
    gg_g: 64,
    l_glref: 8,
    l_base: 16,
    l_maxstack: 32,
    l_stack: 36,
    g_vmstate: 92,
    g_cur_l: 248,
    g_jit_base: 252,
    g_mainthref: 132,
    fn_ffid: 6,
    fn_pc: 16,
    pt_size: 64,
    l_cframe: 48,
    g_to_j: 416,
    j_trace: 368,
    t_mcode: 64,
    t_szmcode: 60,
    pt_sizebc: 8,
    pt_k: 16,
    pt_chunkname: 40,
    pt_firstline: 44,
    pt_numline: 48,
    pt_lineinfo: 52,
    pt_uvinfo: 56,
    pt_sizeuv: 36,
    gct: 5,
    str_len: 12,
    str_size: 16,
    t_str: 4,
    t_proto: 7,
};

impl Layout {
    /// The size of a reference (GCRef, MRef): 8 bytes in GC64, else 4.
    pub fn refsize(&self) -> u64 {
        if self.gc64 {
            8
        } else {
            4
        }
    }
}
