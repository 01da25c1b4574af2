/* Hex digits and %XX escapes. Never logs; depends on libc only. */
#pragma once

#include <stddef.h>

/* The value of one hex digit ('0'-'9', 'a'-'f', 'A'-'F'), or -EINVAL for any other character. */
int unhexchar(char c);

/* Decodes the %XX escapes of s[0..n) into a new NUL-terminated string (owned by the caller); a
 * '%' not followed by two hex digits stays as it is, '+' stays '+'. The decoded text may hold
 * NUL bytes: *ret_len (may be NULL) says how long it is. NULL on -ENOMEM. */
char *percent_decode_lenient(const char *s, size_t n, size_t *ret_len);
