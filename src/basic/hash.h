/* Non-cryptographic hashes: FNV-1a, the one hash for names (NameHash, §2.3), MAC addresses and
 * other stable identifiers derived from strings. Never logs; depends on libc only. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FNV1A32_INIT UINT32_C(2166136261)
#define FNV1A64_INIT UINT64_C(14695981039346656037)

/* Continue a hash over n more bytes (start from FNV1A32_INIT / FNV1A64_INIT). */
uint32_t fnv1a32_update(uint32_t h, const void *data, size_t n);
uint64_t fnv1a64_update(uint64_t h, const void *data, size_t n);

/* The hash of a C string. */
uint32_t fnv1a32_str(const char *s);
uint64_t fnv1a64_str(const char *s);
