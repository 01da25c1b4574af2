/* kubectl's JSONPath output templates (`-o jsonpath=TEMPLATE`, `-o custom-columns=...`): text
 * with `{EXPR}` actions. EXPR is `.a.b`, `.a[0]`, `.a[*].b`, `.a[?(@.k=="v")].b`, `..`-less,
 * optionally starting with `$` or `@`; `{"text"}` prints a literal (\n, \t, \" escapes);
 * `{range EXPR}...{end}` repeats its body for each value, `.` then meaning the value. Several
 * values of one action are printed separated by a space; strings as they are, other values as
 * compact JSON. */
#pragma once

#include <jansson.h>

#include "basic/buf.h"
#include "shared/status.h"

/* Every value at expr under root, appended (borrowed references) to the array ret (owned by the
 * caller). 0, -EINVAL (syntax) or -ENOMEM. */
int cli_jsonpath_values(const json_t *root, const char *expr, json_t *ret);

/* Renders template against root into out. 0, -EINVAL (syntax: *err, when err is not NULL, says
 * where) or -ENOMEM. */
int cli_jsonpath_render(buf *out, const char *template, const json_t *root, api_error *err);

/* One value as a cell: a string as it is, anything else as compact JSON. Owned; NULL on ENOMEM. */
char *cli_jsonpath_text(const json_t *v);
