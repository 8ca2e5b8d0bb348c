/* The offsets src/runtimes/php/mod.rs keeps for PHP 8.2, printed from PHP's
 * own headers (php8.2-dev) as `name value` lines: tests/php.rs compiles
 * this with `php-config --includes` and compares. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include "php.h"
#include "zend_globals.h"
#include "zend_compile.h"

#define P(name, value) printf("%s %zu\n", name, (size_t)(value))

int main(void)
{
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
	P("call_top", ZEND_CALL_TOP);
	return 0;
}
