//! V8's self-description: the post-mortem metadata (`v8dbg_*` constants:
//! class layouts, frame offsets, type tags) that V8 compiles into the
//! binary embedding it for debuggers (llnode, mdb_v8), exported as dynamic
//! symbols, so a stripped `node` keeps them. Each is a 32-bit integer in
//! the file's data, read from the file, not from the process.

use std::collections::HashMap;

use object::{Object, ObjectSection, ObjectSymbol};

/// What fgbpf reads of a V8 heap and frames, from the metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// From a JavaScript frame's rbp: its context (a Smi marker in typed
    /// frames) and its JSFunction.
    pub fp_marker: i16,
    pub fp_function: i16,
    /// JSFunction: its SharedFunctionInfo.
    pub fn_shared: u16,
    /// SharedFunctionInfo: its name or ScopeInfo, its Script (or
    /// DebugInfo).
    pub sfi_name: u16,
    pub sfi_script: u16,
    /// HeapObject: its Map; Map: the instance type.
    pub map: u16,
    pub instance_type: u16,
    /// String: length; sequential strings' characters; ConsString's two
    /// halves, ThinString's actual, SlicedString's parent and offset.
    pub str_len: u16,
    pub seq_chars: u16,
    pub cons_first: u16,
    pub cons_second: u16,
    pub thin_actual: u16,
    pub sliced_parent: u16,
    pub sliced_offset: u16,
    /// Script: its name (a file or URL), its source.
    pub script_name: u16,
    pub script_source: u16,
    /// Code (V8 11 on: the metadata of compiled code, whose instructions
    /// are an InstructionStream in the code space): its deoptimization
    /// data and source position table (V8 11's metadata gives them; V8
    /// 12 and 13 keep them as the two trusted fields between the map and
    /// the wrapper the metadata places; [`NOT_KNOWN`] else, and
    /// optimised code is read without inlining); its InstructionStream,
    /// the start of its instructions and their size (an i32).
    pub code_deopt: u16,
    pub code_positions: u16,
    /// Where in the deoptimization data (an array) its literals (the
    /// inlined functions), the code's own function and the inlining
    /// positions are: the metadata's indices (V8 12 on), else V8 11's.
    pub dd_literals: u16,
    pub dd_function: u16,
    pub dd_inlining: u16,
    /// The array types the deoptimization data, its literals and its
    /// byte arrays may be (V8 12 moved them to trusted space, V8 13 to
    /// protected arrays): [`NOT_KNOWN`] where a version has no such type.
    pub dd_types: [u16; 3],
    pub literal_types: [u16; 3],
    pub bytes_types: [u16; 2],
    /// V8 13 keeps the code's own function in a wrapper: its type and
    /// where the function is in it ([`NOT_KNOWN`] before).
    pub type_sfi_wrapper: u16,
    pub sfi_wrapper_shared: u16,
    pub code_stream: u16,
    pub code_start: u16,
    pub code_size: u16,
    /// InstructionStream: where its instructions start.
    pub stream_header: u16,
    /// Instance types: strings are below `first_nonstring`.
    pub type_code: u16,
    pub type_istream: u16,
    pub type_fixed_array: u16,
    pub type_weak_fixed_array: u16,
    pub type_byte_array: u16,
    pub type_sfi: u16,
    pub type_scope_info: u16,
    /// How a ScopeInfo is laid out, from where the metadata says its
    /// variables begin.
    pub scope: ScopeLayout,
    pub type_script: u16,
    pub first_nonstring: u16,
    /// String instance type bits: representation and encoding.
    pub rep_mask: u16,
    pub enc_mask: u16,
    pub one_byte: u16,
    pub cons: u16,
    pub sliced: u16,
    pub thin: u16,
}

/// A ScopeInfo's layout: after its flags and its parameter and context-local
/// counts, its context locals at once (V8 10 to 12: Smi-tagged flags, the
/// function's position after its names), or its position first (V8 13:
/// untagged 32-bit flags). Told by the metadata's index of the first
/// variable (`scopeinfo_idx_first_vars`): one after the count, or three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeLayout {
    LocalsFirst,
    PositionFirst,
    /// Neither: its names are not read, and its frames said so.
    Unknown,
}

impl ScopeLayout {
    pub fn of(ncontextlocals: i32, first_vars: i32) -> ScopeLayout {
        match first_vars.checked_sub(ncontextlocals) {
            Some(1) => ScopeLayout::LocalsFirst,
            Some(3) => ScopeLayout::PositionFirst,
            _ => ScopeLayout::Unknown,
        }
    }
}

/// A field the metadata does not give.
pub const NOT_KNOWN: u16 = u16::MAX;

impl Layout {
    /// Whether optimised code's inlined functions can be read: V8 11 to
    /// 13; V8 10 (no InstructionStream) not.
    pub fn reads_inlining(&self) -> bool {
        self.code_deopt != NOT_KNOWN && self.code_positions != NOT_KNOWN
    }

    /// Whether the compiled code holding a pc can be found: its
    /// InstructionStream (V8 11 on).
    pub fn reads_code(&self) -> bool {
        self.code_stream != NOT_KNOWN
    }
}

/// The dynamic symbols that name a binary as V8's, and whether a mapped
/// file may be one: Node.js itself, or the shared library a distribution
/// builds it as.
pub fn may_be_v8(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base == "node" || base == "nodejs" || base.starts_with("libnode.so")
}

/// Reads the metadata from an ELF image. `Ok(None)`: not V8 (no
/// metadata); `Err`: V8 whose layout fgbpf does not read, with why.
pub fn read(data: &[u8]) -> Result<Option<Layout>, String> {
    let Ok(obj) = object::File::parse(data) else {
        return Ok(None);
    };
    let mut consts: HashMap<&str, i32> = HashMap::new();
    for s in obj.dynamic_symbols() {
        let Ok(name) = s.name() else { continue };
        let Some(key) = name.strip_prefix("v8dbg_") else { continue };
        if s.address() == 0 {
            continue;
        }
        // Constants that are 0 live in .bss, which has no bytes in the file.
        let value = obj.sections().find_map(|sec| {
            let (a, size) = (sec.address(), sec.size());
            if s.address() < a || s.address() + 4 > a + size {
                return None;
            }
            if sec.kind() == object::SectionKind::UninitializedData {
                return Some(0);
            }
            let bytes = sec.data_range(s.address(), 4).ok()??;
            Some(i32::from_le_bytes(bytes.try_into().ok()?))
        });
        if let Some(v) = value {
            consts.insert(key, v);
        }
    }
    if consts.is_empty() {
        return Ok(None);
    }
    let get = |k: &str| consts.get(k).copied().ok_or_else(|| format!("its V8 metadata lacks {k}"));
    // V8 12 names a field's type `Tagged_T_` where V8 11 said `T`, and
    // some fields anew: the first name of a list that is there.
    let any = |ks: &[&'static str]| -> &'static str {
        ks.iter().find(|k| consts.contains_key(**k)).copied().unwrap_or(ks[0])
    };
    if get("SystemPointerSize")? != 8 {
        return Err("a 32-bit V8".into());
    }
    let off = |k: &str| -> Result<u16, String> {
        let v = get(k)?;
        u16::try_from(v).map_err(|_| format!("its V8 metadata has {k} = {v}"))
    };
    let fp = |k: &str| -> Result<i16, String> {
        let v = get(k)?;
        i16::try_from(v).map_err(|_| format!("its V8 metadata has {k} = {v}"))
    };
    let (mut code_deopt, mut code_positions) = (
        off("class_Code__deoptimization_data__FixedArray").unwrap_or(NOT_KNOWN),
        off("class_Code__source_position_table__ByteArray").unwrap_or(NOT_KNOWN),
    );
    // The Code's fields after its source position table (V8 11), or as
    // V8 12's metadata gives them. V8 10 (Node.js 18) has no
    // InstructionStream (its Code holds its instructions) and gives
    // neither: its compiled code is not read, its frames named by their
    // function alone.
    let (code_stream, code_start, code_size) = if code_positions != NOT_KNOWN {
        (code_positions + 8, code_positions + 16, code_positions + 32)
    } else if consts.contains_key("class_Code__instruction_stream__Tagged_InstructionStream_") {
        (
            off("class_Code__instruction_stream__Tagged_InstructionStream_")?,
            off("class_Code__instruction_start__Address")?,
            off("class_Code__instruction_size__int")?,
        )
    } else {
        (NOT_KNOWN, NOT_KNOWN, NOT_KNOWN)
    };
    // V8 12 and 13: the deoptimization data (or interpreter data) and the
    // position table are the Code's first two fields after its map, before
    // the wrapper at 24 (code.h; each read checked by its type).
    if code_deopt == NOT_KNOWN && code_stream != NOT_KNOWN && off("class_Code__wrapper__Tagged_CodeWrapper_") == Ok(24) {
        (code_deopt, code_positions) = (8, 16);
    }
    let ty = |k: &str| off(k).unwrap_or(NOT_KNOWN);
    let index = |k: &str, v11: u16| off(k).unwrap_or(v11);
    let l = Layout {
        fp_marker: fp("off_fp_context_or_frame_type")?,
        fp_function: fp("off_fp_function")?,
        fn_shared: off("class_JSFunction__shared__SharedFunctionInfo")?,
        sfi_name: off(any(&[
            "class_SharedFunctionInfo__name_or_scope_info__Object",
            "class_SharedFunctionInfo__name_or_scope_info__Tagged_Object_",
            "class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_",
        ]))?,
        // V8 12 keeps debug info apart: the field holds the Script only.
        sfi_script: off(any(&[
            "class_SharedFunctionInfo__script_or_debug_info__HeapObject",
            "class_SharedFunctionInfo__script__Tagged_HeapObject_",
        ]))?,
        map: off("class_HeapObject__map__Map")?,
        instance_type: off("class_Map__instance_type__uint16_t")?,
        str_len: off("class_String__length__int32_t")?,
        seq_chars: off("class_SeqOneByteString__chars__char")?,
        cons_first: off("class_ConsString__first__String")?,
        cons_second: off("class_ConsString__second__String")?,
        thin_actual: off("class_ThinString__actual__String")?,
        sliced_parent: off("class_SlicedString__parent__String")?,
        sliced_offset: off("class_SlicedString__offset__SMI")?,
        script_name: off("class_Script__name__Object")?,
        script_source: off("class_Script__source__Object")?,
        code_deopt,
        code_positions,
        dd_literals: index("DeoptimizationDataLiteralArrayIndex", 2),
        dd_function: index(
            any(&["DeoptimizationDataSharedFunctionInfoIndex", "DeoptimizationDataWrappedSharedFunctionInfoIndex"]),
            6,
        ),
        dd_inlining: index("DeoptimizationDataInliningPositionsIndex", 7),
        dd_types: [
            ty("type_FixedArray__FIXED_ARRAY_TYPE"),
            ty("type_TrustedFixedArray__TRUSTED_FIXED_ARRAY_TYPE"),
            ty("type_ProtectedFixedArray__PROTECTED_FIXED_ARRAY_TYPE"),
        ],
        literal_types: [
            ty("type_FixedArray__FIXED_ARRAY_TYPE"),
            ty("type_WeakFixedArray__WEAK_FIXED_ARRAY_TYPE"),
            ty("type_TrustedWeakFixedArray__TRUSTED_WEAK_FIXED_ARRAY_TYPE"),
        ],
        bytes_types: [ty("type_ByteArray__BYTE_ARRAY_TYPE"), ty("type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE")],
        type_sfi_wrapper: ty("type_SharedFunctionInfoWrapper__SHARED_FUNCTION_INFO_WRAPPER_TYPE"),
        sfi_wrapper_shared: ty("class_SharedFunctionInfoWrapper__shared_info__Tagged_SharedFunctionInfo_"),
        code_stream,
        code_start,
        code_size,
        stream_header: off("class_InstructionStream__instruction_start__uintptr_t").unwrap_or(16),
        type_code: off("type_Code__CODE_TYPE")?,
        // No InstructionStream before V8 11: its code is read without
        // inlining (the type never matches).
        type_istream: off("type_InstructionStream__INSTRUCTION_STREAM_TYPE").unwrap_or(u16::MAX),
        type_fixed_array: off("type_FixedArray__FIXED_ARRAY_TYPE")?,
        type_weak_fixed_array: off("type_WeakFixedArray__WEAK_FIXED_ARRAY_TYPE")?,
        type_byte_array: off("type_ByteArray__BYTE_ARRAY_TYPE")?,
        type_sfi: off("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE")?,
        type_scope_info: off("type_ScopeInfo__SCOPE_INFO_TYPE")?,
        scope: ScopeLayout::of(
            get("scopeinfo_idx_ncontextlocals").unwrap_or(2),
            get("scopeinfo_idx_first_vars").unwrap_or(3),
        ),
        type_script: off("type_Script__SCRIPT_TYPE")?,
        first_nonstring: off("FirstNonstringType")?,
        rep_mask: off("StringRepresentationMask")?,
        enc_mask: off("StringEncodingMask")?,
        one_byte: off("OneByteStringTag")?,
        cons: off("ConsStringTag")?,
        sliced: off("SlicedStringTag")?,
        thin: off("ThinStringTag")?,
    };
    // Pointer compression (4-byte tagged fields) puts the SharedFunctionInfo
    // 4 bytes after the context; fgbpf reads full pointers only.
    let ctx = off("class_JSFunction__context__Context")?;
    if ctx != l.fn_shared + 8 {
        return Err("a V8 built with pointer compression (4-byte heap fields)".into());
    }
    // The walker reads a SharedFunctionInfo's first 48 bytes (v8.bpf.h).
    if l.sfi_name > 40 || l.sfi_script > 40 {
        return Err("a SharedFunctionInfo layout fgbpf does not know".into());
    }
    Ok(Some(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_info_layout_is_told_by_where_its_variables_begin() {
        // Node.js 22's V8 12.4 and Node.js 24's V8 13.6 metadata.
        assert_eq!(ScopeLayout::of(2, 3), ScopeLayout::LocalsFirst);
        assert_eq!(ScopeLayout::of(2, 5), ScopeLayout::PositionFirst);
        assert_eq!(ScopeLayout::of(2, 4), ScopeLayout::Unknown);
        assert_eq!(ScopeLayout::of(i32::MIN, 3), ScopeLayout::Unknown);
    }
}
