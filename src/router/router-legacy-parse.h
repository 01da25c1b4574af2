/* Parsers of client input for the legacy layer (fuzzed by fuzz/fuzz-router-legacy.c). */
#pragma once

#include <stddef.h>

/* Python shlex.split (POSIX mode, no comments): *out is a NULL-terminated owned vector
 * (strv_free). On a syntax error returns -EINVAL with *ret_error = Python's message
 * ("No closing quotation", "No escaped character"), static. */
int router_shlex_split(const char *s, char ***out, const char **ret_error);

/* Finds the multipart/form-data part named "file": *ret_filename (owned) is its filename,
 * *ret_data / *ret_len its content (borrowed from body). Returns 0, -EINVAL (no such part,
 * malformed body, not multipart) or -ENOMEM. */
int router_multipart_file(const char *content_type, const char *body, size_t len,
                          char **ret_filename, const char **ret_data, size_t *ret_len);

/* Streaming variant for a body prefix: 1 with *ret_filename (owned) as soon as the "file" part's
 * headers are in, 0 when more of the body is needed, -EINVAL when it cannot have one. */
int router_multipart_peek_filename(const char *content_type, const char *prefix, size_t len,
                                   char **ret_filename);
