/* Line work on a sandbox log for asb_sandbox_logs() (--tail, --since, --timestamps): the time of
 * each line from the <log>.times file asb serve writes beside it (src/local/local-logs.h), the
 * lines before a time dropped, each line prefixed with its time, and only the last N lines of
 * what is there when the read starts. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "asb/sandbox.h"
#include "basic/buf.h"

/* When the chunks of one log file were read: offsets ascending, with their times (Unix ns). */
typedef struct log_times {
    off_t *off;
    int64_t *ns;
    size_t n;
} log_times;

/* (Re)loads log_path's .times file into t (empty when there is none). 0 or -ENOMEM. */
int log_times_load(log_times *t, const char *log_path);
void log_times_done(log_times *t);

typedef struct log_lines {
    asb_sandbox_data_cb cb;
    void *payload;
    bool timestamps;
    int64_t since_ns; /* > 0: lines older than this are dropped */
    long long tail;   /* >= 0 while collecting: only the last `tail` lines are delivered */
    bool collecting;  /* the first read with a tail: lines wait in `kept` */
    buf line;         /* the line read so far (no newline yet) */
    int64_t line_ns;  /* its time, -1 when unknown */
    buf kept;         /* collected lines */
} log_lines;

/* Feeds len bytes read from a file at offset off, whose chunk times are t. Returns 0 or cb's
 * non-zero value, or ASB_ENOMEM. */
int log_lines_feed(log_lines *l, const char *data, size_t len, off_t off, const log_times *t);
/* Delivers the partial last line (a log that does not end with a newline). */
int log_lines_flush(log_lines *l);
/* Ends collecting: delivers the last `tail` lines kept. */
int log_lines_end_collect(log_lines *l);
void log_lines_done(log_lines *l);
