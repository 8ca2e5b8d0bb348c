//! The layout of the LuaJIT fgbpf reads: offsets into its structures
//! (x86-64, GC64, two-slot frames), taken from the version's own headers
//! (openresty/luajit2 v2.1-20230119: `offsetof` over lj_obj.h,
//! lj_dispatch.h and lj_frame.h, as docs/runtimes/luajit.md says), and
//! checked on the live library by tests/luajit.rs and the BPF walker
//! (a GG_State's main lua_State points back at its global_State).

/// Offsets into one LuaJIT version's structures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
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
