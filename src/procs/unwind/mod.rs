//! TEMPORARY STUB (replaced by the real compiler from branch h-unwind).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Row {
    pub pc: u32,
    pub cfa_off: i32,
    pub rbp_off: i16,
    pub cfa_type: u8,
    pub rbp_type: u8,
}
pub struct Table {
    pub base: u64,
    pub rows: Vec<Row>,
}
#[derive(Debug)]
pub struct Error(String);
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
pub fn compile(_data: &[u8]) -> Result<Table, Error> {
    Err(Error("stub".into()))
}
