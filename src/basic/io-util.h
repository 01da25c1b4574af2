/* Whole writes on blocking fds. Never logs; depends on libc only. */
#pragma once

#include <stddef.h>

/* Writes all n bytes of p to fd, retrying a write a signal interrupted and continuing after a
 * partial one. 0, or the -errno of the write that failed (-EIO should write(2) return 0); what
 * was written before a failure stays written. */
int loop_write(int fd, const void *p, size_t n);

/* loop_write() for a socket, with send(MSG_NOSIGNAL): a peer that went away is -EPIPE, never a
 * SIGPIPE. -EAGAIN when a send timeout (SO_SNDTIMEO) ran out. */
int loop_send(int fd, const void *p, size_t n);
