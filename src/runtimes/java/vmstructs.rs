//! HotSpot's self-description: the `gHotSpotVMStructs`, `gHotSpotVMTypes`,
//! `gHotSpotVMIntConstants` and `gHotSpotVMLongConstants` tables that
//! libjvm.so exports for the serviceability agent (also in a stripped
//! libjvm: they are dynamic symbols), read from the live process. Each
//! table is an array of entries whose field offsets and stride libjvm
//! exports too (`gHotSpotVMStructEntryTypeNameOffset`, ...), ended by an
//! entry whose name pointer is null. Everything read is untrusted: entry
//! counts and string lengths are capped.

use std::collections::HashMap;

use crate::procs::mem::Mem;

/// Entries read at most per table (JDK 17 has about 1,900 fields).
const MAX_ENTRIES: usize = 20_000;
/// Longest type or field name read.
const MAX_NAME: usize = 256;

/// One field: an offset in its type, or a static's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub is_static: bool,
    /// The C++ type as vmStructs spells it (`address`, `int`, `u2`, ...).
    pub ty: Option<&'static str>,
    pub offset: u64,
    pub address: u64,
}

/// The four tables of one JVM.
#[derive(Debug, Default)]
pub struct VmStructs {
    pub fields: HashMap<(String, String), Field>,
    /// Type name → sizeof.
    pub types: HashMap<String, u64>,
    pub ints: HashMap<String, i32>,
    pub longs: HashMap<String, i64>,
}

/// Addresses (already relocated) of the exported globals that describe
/// the tables: the symbol's link-time address plus the load bias.
pub type Symbols<'a> = &'a dyn Fn(&str) -> Option<u64>;

impl VmStructs {
    /// Reads all four tables; `None` when libjvm exports no
    /// `gHotSpotVMStructs` or the table cannot be read.
    pub fn read(mem: &Mem, sym: Symbols<'_>) -> Result<VmStructs, String> {
        let global = |name: &str| -> Result<u64, String> {
            let at = sym(name).ok_or_else(|| format!("libjvm.so exports no {name}"))?;
            mem.u64(at).ok_or_else(|| format!("{name} is unreadable"))
        };
        let mut vm = VmStructs::default();

        let base = global("gHotSpotVMStructs")?;
        let stride = global("gHotSpotVMStructEntryArrayStride")?;
        let o_type = global("gHotSpotVMStructEntryTypeNameOffset")?;
        let o_field = global("gHotSpotVMStructEntryFieldNameOffset")?;
        let o_tstring = global("gHotSpotVMStructEntryTypeStringOffset")?;
        let o_static = global("gHotSpotVMStructEntryIsStaticOffset")?;
        let o_offset = global("gHotSpotVMStructEntryOffsetOffset")?;
        let o_address = global("gHotSpotVMStructEntryAddressOffset")?;
        check_stride(stride, &[o_type, o_field, o_tstring, o_static, o_offset, o_address])?;
        for i in 0..MAX_ENTRIES as u64 {
            let e = base + i * stride;
            let tname = mem.u64(e + o_type).ok_or("a gHotSpotVMStructs entry is unreadable")?;
            if tname == 0 {
                break;
            }
            let fname = mem.u64(e + o_field).ok_or("a gHotSpotVMStructs entry is unreadable")?;
            let (Some(t), Some(f)) = (mem.cstr(tname, MAX_NAME), mem.cstr(fname, MAX_NAME)) else {
                continue;
            };
            let ty = mem
                .u64(e + o_tstring)
                .filter(|&p| p != 0)
                .and_then(|p| mem.cstr(p, MAX_NAME));
            let field = Field {
                ty: ty.as_deref().and_then(small_type),
                is_static: mem.i32(e + o_static).unwrap_or(0) != 0,
                offset: mem.u64(e + o_offset).unwrap_or(0),
                address: mem.u64(e + o_address).unwrap_or(0),
            };
            vm.fields.insert((t, f), field);
        }

        let base = global("gHotSpotVMTypes")?;
        let stride = global("gHotSpotVMTypeEntryArrayStride")?;
        let o_type = global("gHotSpotVMTypeEntryTypeNameOffset")?;
        let o_size = global("gHotSpotVMTypeEntrySizeOffset")?;
        check_stride(stride, &[o_type, o_size])?;
        for i in 0..MAX_ENTRIES as u64 {
            let e = base + i * stride;
            let tname = mem.u64(e + o_type).ok_or("a gHotSpotVMTypes entry is unreadable")?;
            if tname == 0 {
                break;
            }
            if let (Some(t), Some(size)) = (mem.cstr(tname, MAX_NAME), mem.u64(e + o_size)) {
                vm.types.insert(t, size);
            }
        }

        for (table, long) in [("Int", false), ("Long", true)] {
            let base = global(&format!("gHotSpotVM{table}Constants"))?;
            let stride = global(&format!("gHotSpotVM{table}ConstantEntryArrayStride"))?;
            let o_name = global(&format!("gHotSpotVM{table}ConstantEntryNameOffset"))?;
            let o_value = global(&format!("gHotSpotVM{table}ConstantEntryValueOffset"))?;
            check_stride(stride, &[o_name, o_value])?;
            for i in 0..MAX_ENTRIES as u64 {
                let e = base + i * stride;
                let name = mem.u64(e + o_name).ok_or("a constants entry is unreadable")?;
                if name == 0 {
                    break;
                }
                let Some(n) = mem.cstr(name, MAX_NAME) else { continue };
                if long {
                    if let Some(v) = mem.u64(e + o_value) {
                        vm.longs.insert(n, v as i64);
                    }
                } else if let Some(v) = mem.i32(e + o_value) {
                    vm.ints.insert(n, v);
                }
            }
        }
        Ok(vm)
    }

    /// A field, by type and name.
    pub fn field(&self, ty: &str, name: &str) -> Option<Field> {
        self.fields.get(&(ty.to_string(), name.to_string())).copied()
    }

    /// The offset of the first of `names` that `ty` (or, in turn, each of
    /// `supers`, where older versions declared it) has.
    pub fn offset(&self, tys: &[&str], names: &[&str]) -> Option<u64> {
        tys.iter()
            .flat_map(|t| names.iter().map(move |n| (*t, *n)))
            .find_map(|(t, n)| self.field(t, n).filter(|f| !f.is_static).map(|f| f.offset))
    }

    /// The address of a static field.
    pub fn address(&self, ty: &str, name: &str) -> Option<u64> {
        self.field(ty, name)
            .filter(|f| f.is_static && f.address != 0)
            .map(|f| f.address)
    }

    pub fn size(&self, ty: &str) -> Option<u64> {
        self.types.get(ty).copied()
    }

    pub fn int(&self, name: &str) -> Option<i32> {
        self.ints.get(name).copied()
    }
}

/// The few type spellings the layout cares about (kept as statics so
/// that Field stays Copy).
fn small_type(t: &str) -> Option<&'static str> {
    [
        "address",
        "int",
        "int16_t",
        "uint16_t",
        "u2",
        "u1",
        "uint8_t",
        "CodeBlobKind",
        "CodeBlobType",
    ]
    .into_iter()
    .find(|k| *k == t)
}

fn check_stride(stride: u64, offsets: &[u64]) -> Result<(), String> {
    if stride == 0 || stride > 256 || offsets.iter().any(|&o| o + 8 > stride) {
        return Err(format!("implausible vmStructs entry layout (stride {stride})"));
    }
    Ok(())
}
