/* Standard base64 (RFC 4648 §4, with padding), as MCP carries binary file content and blob
 * resources. Never logs; depends on libc only. */
#pragma once

#include <stddef.h>

/* Encodes n bytes into a NUL-terminated string. *ret is owned by the caller (free). 0 or -ENOMEM.
 */
int base64_encode(const void *data, size_t n, char **ret, size_t *ret_len);

/* Decodes text (padding optional; ASCII whitespace ignored) into *ret (owned by the caller,
 * NUL-terminated for convenience, the NUL not counted in *ret_len). 0, -EINVAL for a character
 * outside the alphabet or a truncated quantum, -ENOMEM. */
int base64_decode(const char *text, size_t n, char **ret, size_t *ret_len);
