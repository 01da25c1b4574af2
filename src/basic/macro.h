/* Small language-level helpers: cleanup attributes, ownership transfer, array sizes.
 * Never logs; depends on libc only. */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

/* Hand ownership out of a cleanup-managed variable. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _took = (p);                                                                 \
        (p) = NULL;                                                                                \
        _took;                                                                                     \
    })
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _took = (fd);                                                                          \
        (fd) = -1;                                                                                 \
        _took;                                                                                     \
    })

static inline void freep(void *p)
{
    free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

/* close() that keeps errno, accepts -1 and returns -1, for `fd = safe_close(fd)`. */
static inline int safe_close(int fd)
{
    if (fd >= 0) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return -1;
}
static inline void closep(int *fd)
{
    safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void closedirp(DIR **d)
{
    if (*d)
        closedir(*d);
}
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Defines `static inline void funcp(type *p)` calling func(*p) when non-NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
    static inline void func##p(type *p)                                                            \
    {                                                                                              \
        if (*p)                                                                                    \
            func(*p);                                                                              \
    }

/* errno as a negative value; never 0 even if errno was not set. */
static inline int negative_errno(void)
{
    return errno > 0 ? -errno : -EIO;
}

/* Evaluate a libc call returning -1/errno; yield 0 or -errno. */
#define RET_NERRNO(expr)                                                                           \
    ({                                                                                             \
        long _r = (long)(expr);                                                                    \
        _r < 0 ? negative_errno() : (int)_r;                                                       \
    })
