/* Predicates on path strings (no filesystem access): what a spec may name as a path inside a
 * sandbox, checked the same way at admission and where the runtime uses it. */
#pragma once

#include <stdbool.h>

/* A relative path: not empty, not absolute, at most 253 bytes, no empty, "." or ".." component
 * (with allow_slash false: a single component). */
bool path_is_clean_relative(const char *s, bool allow_slash);
/* An absolute path, not "/", with no empty, "." or ".." component. */
bool path_is_clean_absolute(const char *s);
