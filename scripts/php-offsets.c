/* The offsets src/runtimes/php/mod.rs's Layout holds, printed from one PHP
 * version's own headers (phpX.Y-dev) as `name value` lines, with the
 * constants the reader and the BPF walker assume: scripts/php-layouts.sh
 * compiles this against each version's headers and writes
 * src/runtimes/php/layouts.rs from what it prints. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdio.h>
#include "php.h"
#include "zend_globals.h"
#include "zend_compile.h"
#include "zend_modules.h"

#define P(name, value) printf("%s %zu\n", name, (size_t)(value))

int main(void)
{
#ifdef ZTS
	P("zts", 1);
#else
	P("zts", 0);
#endif
	P("api", ZEND_MODULE_API_NO);
	P("eg_size", sizeof(zend_executor_globals));
	P("eg_current_execute_data", offsetof(zend_executor_globals, current_execute_data));
	P("ex_opline", offsetof(zend_execute_data, opline));
	P("ex_func", offsetof(zend_execute_data, func));
	P("ex_type_info", offsetof(zend_execute_data, This) + offsetof(zval, u1.type_info));
	P("ex_prev", offsetof(zend_execute_data, prev_execute_data));
	P("fn_name", offsetof(zend_function, common.function_name));
	P("fn_scope", offsetof(zend_function, common.scope));
	P("op_last", offsetof(zend_op_array, last));
	P("op_opcodes", offsetof(zend_op_array, opcodes));
	P("op_filename", offsetof(zend_op_array, filename));
	P("op_line_start", offsetof(zend_op_array, line_start));
	P("zop_lineno", offsetof(zend_op, lineno));
	P("zop_size", sizeof(zend_op));
	P("ce_name", offsetof(zend_class_entry, name));
	P("str_len", offsetof(zend_string, len));
	P("str_val", offsetof(zend_string, val));
	/* Assumed, not kept per version: checked by the script. */
	P("const_str_type_info", offsetof(zend_string, gc.u.type_info));
	P("const_is_string", IS_STRING);
	P("const_internal_function", ZEND_INTERNAL_FUNCTION);
	P("const_user_function", ZEND_USER_FUNCTION);
	P("const_eval_code", ZEND_EVAL_CODE);
	P("const_call_top", ZEND_CALL_TOP);
	P("const_fn_type", offsetof(zend_function, type));
	return 0;
}
