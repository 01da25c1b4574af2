/* Monotonic/real time in microseconds and Go-style duration parsing. */
#pragma once

#include <stdint.h>
#include <time.h>

typedef uint64_t usec_t;
#define USEC_PER_SEC ((usec_t)1000000)
#define USEC_PER_MSEC ((usec_t)1000)
#define NSEC_PER_USEC ((uint64_t)1000)

/* The time of `clock` in microseconds. */
usec_t now_usec(clockid_t clock);
/* The time of `clock` in whole milliseconds, signed: a deadline minus now may go below zero. */
int64_t now_msec(clockid_t clock);
/* The CLOCK_REALTIME instant `usec` from now, the absolute time pthread_cond_timedwait() takes
 * (its condition variables run on CLOCK_REALTIME). */
struct timespec timespec_realtime_after(usec_t usec);

/* Parses Go time.ParseDuration syntax ("10s", "1m30s", "500ms", "1.5h", "0").
 * Negative durations are rejected. Returns 0 or -EINVAL/-ERANGE. */
int parse_go_duration(const char *s, usec_t *ret);

/* Parses an RFC 3339 timestamp ("2026-01-02T03:04:05Z", fractional seconds and +hh:mm offsets
 * allowed) into microseconds since the epoch. 0 or -EINVAL. */
int parse_rfc3339(const char *s, int64_t *ret_usec);
