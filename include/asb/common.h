/* libasb: common definitions (export macro, memory release, version). Plain C11. */
#ifndef ASB_COMMON_H
#define ASB_COMMON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ASB_PUBLIC __attribute__((visibility("default")))
#else
#define ASB_PUBLIC
#endif

/* Library version. */
#define ASB_VERSION "0.1.0"
#define ASB_VERSION_MAJOR 0
#define ASB_VERSION_MINOR 1

/* The version string of the library actually loaded ("0.1.0"). Borrowed, static. */
ASB_PUBLIC const char *asb_version(void);

/* Releases memory the library handed out through a `char **out` (objects, lists, manifests).
 * Accepts NULL. */
ASB_PUBLIC void asb_free(void *ptr);

#ifdef __cplusplus
}
#endif
#endif
