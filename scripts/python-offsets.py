# Prints the structure offsets fgbpf's Python walker uses, read from the
# DWARF of a CPython binary or libpython, one `name = value` per line:
#   gdb -batch -nx LIBPYTHON -x scripts/python-offsets.py
# The names are the fields of `Layout` in src/runtimes/python/mod.rs;
# tests/python.rs compares every installed CPython with that table.
import gdb


def offset(expr):
    try:
        return int(gdb.parse_and_eval("(unsigned long)&(%s)" % expr))
    except gdb.error:
        return None


def size(t):
    try:
        return int(gdb.parse_and_eval("sizeof(%s)" % t))
    except gdb.error:
        return None


def first(*exprs):
    for e in exprs:
        v = offset(e)
        if v is not None:
            return v
    return None


old = offset("((PyThreadState*)0)->frame") is not None
fields = {
    "interp_head": first("((struct pyruntimestate*)0)->interpreters.head"),
    "threads_head": first("((PyInterpreterState*)0)->threads.head", "((PyInterpreterState*)0)->tstate_head"),
    "ts_next": first("((PyThreadState*)0)->next"),
    "ts_thread_id": first("((PyThreadState*)0)->thread_id"),
    "ts_frame": first("((PyThreadState*)0)->frame", "((PyThreadState*)0)->cframe", "((PyThreadState*)0)->current_frame")
    if old
    else first("((PyThreadState*)0)->cframe", "((PyThreadState*)0)->current_frame"),
    "cframe_frame": None if old else first("((_PyCFrame*)0)->current_frame"),
    "f_code": first("((PyFrameObject*)0)->f_code") if old else first("((_PyInterpreterFrame*)0)->f_code", "((_PyInterpreterFrame*)0)->f_executable"),
    "f_back": first("((PyFrameObject*)0)->f_back") if old else first("((_PyInterpreterFrame*)0)->previous"),
    "f_instr": first("((PyFrameObject*)0)->f_lasti") if old else first("((_PyInterpreterFrame*)0)->prev_instr", "((_PyInterpreterFrame*)0)->instr_ptr"),
    "f_entry": None if old else first("((_PyInterpreterFrame*)0)->is_entry", "((_PyInterpreterFrame*)0)->owner"),
    "co_code": first("((PyCodeObject*)0)->co_code_adaptive") or 0,
    "co_filename": first("((PyCodeObject*)0)->co_filename"),
    "co_name": first("((PyCodeObject*)0)->co_name"),
    "co_qualname": first("((PyCodeObject*)0)->co_qualname"),
    "co_firstlineno": first("((PyCodeObject*)0)->co_firstlineno"),
    "co_linetable": first("((PyCodeObject*)0)->co_linetable", "((PyCodeObject*)0)->co_lnotab"),
    "ascii_data": size("PyASCIIObject"),
    "compact_data": size("PyCompactUnicodeObject"),
}
# 3.11 has both is_entry and owner: the walker reads is_entry there.
for name, value in fields.items():
    print("%s = %s" % (name, "none" if value is None else value))
