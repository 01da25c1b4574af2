/* jansson helpers the tree shares. Never logs. */
#pragma once

#include <jansson.h>
#include <stddef.h>

/* json_dumps(v, flags) followed by one '\n': a line of JSON Lines / a newline-framed message
 * (with JSON_COMPACT the text itself holds no raw newline). A NUL-terminated string owned by the
 * caller, its length with the newline in *ret_len (may be NULL); NULL on ENOMEM. */
char *json_dumps_line(const json_t *v, size_t flags, size_t *ret_len);
