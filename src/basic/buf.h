/* A growable byte buffer, the one used everywhere a body, a message or a text is built up.
 * Always NUL-terminated after the data (when data != NULL), so a text buffer is a C string.
 * Every function that may allocate returns 0 or -ENOMEM and leaves the buffer as it was on failure.
 * Never logs; depends on libc only. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#include "basic/macro.h"

typedef struct buf {
    char *data; /* owned; NULL until the first byte is added */
    size_t len; /* bytes used, not counting the terminating NUL */
    size_t cap; /* bytes allocated */
} buf;

#define BUF_INIT {NULL, 0, 0}

/* Makes room for `extra` more bytes (plus the NUL). 0 or -ENOMEM (also on size overflow). */
int buf_reserve(buf *b, size_t extra);
/* Appends n bytes. 0 or -ENOMEM. */
int buf_append(buf *b, const void *data, size_t n);
/* Appends a C string (without its NUL). 0 or -ENOMEM. */
int buf_append_str(buf *b, const char *s);
int buf_append_byte(buf *b, char c);
/* Appends printf-formatted text. 0 or -ENOMEM (-EINVAL for a bad format). */
int buf_appendf(buf *b, const char *fmt, ...) _printf_(2, 3);
int buf_appendv(buf *b, const char *fmt, va_list ap);
/* Appends what fd yields until end of file (a read interrupted by a signal is retried). 0,
 * -ENOMEM, or the -errno of a failed read (-EAGAIN on an empty non-blocking fd); what was read
 * before a failure stays in the buffer. */
int buf_append_fd(buf *b, int fd);
/* A new string (owned by the caller) made by printf; NULL on -ENOMEM. */
char *strdup_printf(const char *fmt, ...) _printf_(1, 2);
/* Drops the first n bytes (a consumed prefix), keeping the rest. */
void buf_consume(buf *b, size_t n);
/* Empties the buffer but keeps its allocation. */
void buf_reset(buf *b);
/* Hands the data out (owned by the caller; "" when empty, NULL only on -ENOMEM) and empties
 * the buffer. `ret_len` may be NULL. */
char *buf_steal(buf *b, size_t *ret_len);
/* Frees the data and resets the buffer; the struct itself is the caller's. */
void buf_done(buf *b);

static inline void buf_donep(buf *b)
{
    buf_done(b);
}
#define _cleanup_buf_ _cleanup_(buf_donep)
