/* Random bytes and identifiers from the kernel's CSPRNG. */
#pragma once

#include <stddef.h>

/* Fills buf with n random bytes (getrandom, retried on EINTR). 0 or -errno. */
int random_bytes(void *buf, size_t n);
/* A random (version 4) UUID in its 36-character text form. 0 or -errno. */
int uuid_v4(char out[37]);
