/* NULL-terminated arrays of owned strings, and a growable one. Never logs; depends on libc only. */
#pragma once

#include <stddef.h>

/* Frees every string of v and v itself; accepts NULL. Returns NULL. */
char **strv_free(char **v);
static inline void strv_freep(char ***v)
{
    strv_free(*v);
}
#define _cleanup_strv_free_ __attribute__((cleanup(strv_freep)))

/* A growable array: v[0..n) owned strings, v[n] == NULL once anything was added (v NULL until
 * then). Release with strv_done(), or hand v out and free it later with strv_free(). */
typedef struct strv {
    char **v;
    size_t n;
} strv;

#define STRV_INIT {NULL, 0}

/* Appends x, taking ownership of it (freed on failure). 0 or -ENOMEM (also for x == NULL, the
 * result of a failed strdup). The array is left as it was on failure. */
int strv_push(strv *s, char *x);
/* Appends a copy of x unless an equal string is in already. 0 or -ENOMEM. */
int strv_add_unique(strv *s, const char *x);
/* Frees the strings and the array; the struct is empty afterwards. */
void strv_done(strv *s);
