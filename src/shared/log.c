#include "shared/log.h"

#include "basic/buf.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *log_component = "asb";
static bool log_json;
static log_level log_min = LOG_LEVEL_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_setup(const char *component, bool json, log_level min_level)
{
    log_component = component;
    log_json = json;
    log_min = min_level;
}

static void format_time(char *out, size_t n)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, n - k, ".%03ldZ", ts.tv_nsec / 1000000);
}

void log_kv(log_level level, const char *msg, ...)
{
    if (level < log_min)
        return;
    char ts[40];
    format_time(ts, sizeof(ts));
    va_list ap;
    va_start(ap, msg);
    pthread_mutex_lock(&log_lock);
    if (log_json) {
        json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "ts", ts, "level", level_names[level], "logger",
                              log_component, "msg", msg);
        const char *k;
        while (o && (k = va_arg(ap, const char *))) {
            const char *v = va_arg(ap, const char *);
            json_object_set_new(o, k, json_string(v ? v : ""));
        }
        char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (line)
            fprintf(stderr, "%s\n", line);
        free(line);
        json_decref(o);
    } else {
        /* One write per line (stderr is unbuffered): a line never interleaves with another
         * process's, and costs one system call, not one per field. */
        buf line = BUF_INIT;
        int r = buf_appendf(&line, "%s %s %s: %s", ts, level_names[level], log_component, msg);
        const char *k;
        while (r >= 0 && (k = va_arg(ap, const char *))) {
            const char *v = va_arg(ap, const char *);
            r = buf_appendf(&line, " %s=%s", k, v ? v : "");
        }
        if (r >= 0 && buf_append(&line, "\n", 1) >= 0)
            fwrite(line.data, 1, line.len, stderr);
        buf_done(&line);
    }
    pthread_mutex_unlock(&log_lock);
    va_end(ap);
}
