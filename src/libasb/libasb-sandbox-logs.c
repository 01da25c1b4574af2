/* asb_sandbox_logs(): the main process's output, or sandboxd's. Each is a pipe that `asb serve`
 * reads into $STATE/sandboxes/<uid>/{main,sandboxd}.log, a host file only asb serve writes,
 * rotated to <log>.1 past its cap, with <log>.times beside it (when each chunk came) and the run
 * before the last restart kept as <log>.previous (src/local/local-logs.h); sandboxd records the
 * main process's exit code in /.asb/main/exit in the container, which is
 * $STATE/sandboxes/<uid>/main/exit on the host (docs/local-sandboxes.md). The log is read
 * straight from the host file: it has to stay readable when the main process (and so possibly
 * the sandbox) has finished. A full read is <log>.1 then <log>; follow mode goes on with <log>
 * and opens it again when it is rotated (a new inode). --tail/--since/--timestamps go through the
 * line filter of libasb-logs-lines.c. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api-objects.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-logs-lines.h"
#include "shared/status.h"

#define POLL_MS 100
#define RECHECK_MS 1000

/* The Sandbox's metadata.uid, whether its (first) container has a command or args, which is what
 * makes the control plane run a main process, and that container's name (owned, may be NULL). */
static int get_uid(asb_client *client, const char *ns, const char *name, char **ret_uid,
                   int *ret_has_cmd, char **ret_ctr_name)
{
    json_t *obj = NULL;
    int r = asbi_object_get_json(&obj, client, "Sandbox", ns, name);
    if (r != ASB_OK)
        return r;
    const char *uid = json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
    if (!uid || !*uid || strchr(uid, '/') || strcmp(uid, ".") == 0 || strcmp(uid, "..") == 0)
        r = asbi_error_set(ASB_EPROTOCOL, 0, NULL, "sandbox %s has no usable metadata.uid", name);
    else if (!(*ret_uid = strdup(uid)))
        r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    json_t *ctr = api_pod_template_container0(api_pod_template_of(obj));
    if (ret_has_cmd)
        *ret_has_cmd = json_array_size(json_object_get(ctr, "command")) > 0 ||
                       json_array_size(json_object_get(ctr, "args")) > 0;
    const char *cn = json_string_value(json_object_get(ctr, "name"));
    if (ret_ctr_name && r == ASB_OK && cn && !(*ret_ctr_name = strdup(cn)))
        r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    json_decref(obj);
    return r;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Where the bytes go: straight to cb, or through the line filter (lines non-NULL) with the
 * chunk times of the file being read. */
typedef struct sink {
    asb_sandbox_data_cb cb;
    void *payload;
    log_lines *lines;
    log_times times;
} sink;

/* Copies fd from its offset to EOF to the sink. ASB_OK, cb's non-zero value, or an error (set).
 * path: the file's name, whose .times the line filter reads. */
static int drain(int fd, const char *path, sink *s)
{
    char chunk[65536];
    bool loaded = false;
    for (;;) {
        off_t off = s->lines ? lseek(fd, 0, SEEK_CUR) : 0;
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return asbi_error_set(ASB_ERROR, 0, NULL, "cannot read the log: %s", strerror(errno));
        if (n == 0)
            return ASB_OK;
        if (!s->lines) {
            int r = s->cb(chunk, (size_t)n, s->payload);
            if (r)
                return r;
            continue;
        }
        /* the times are written before the bytes: loaded after the read, they cover them */
        if (!loaded && log_times_load(&s->times, path) < 0)
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        loaded = true;
        int r = log_lines_feed(s->lines, chunk, (size_t)n, off, &s->times);
        if (r)
            return r;
    }
}

/* The public code for a log file that is there but cannot be opened (errno from open). */
static int open_failed(const char *path)
{
    int e = -errno;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    api_error_set_errno(&err, e, "cannot open %s: %s", path, strerror(-e));
    return asbi_error_from(e, &err);
}

/* Copies the whole file at path (if any) to the sink. */
static int drain_path(const char *path, sink *s)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? ASB_OK : open_failed(path);
    int r = drain(fd, path, s);
    close(fd);
    return r;
}

/* Whether path is no longer the file open as fd (rotated: a new inode, or gone) or was
 * truncated below fd's offset. */
static int rotated(int fd, const char *path)
{
    struct stat a, b;
    if (fstat(fd, &a) < 0 || stat(path, &b) < 0)
        return 1;
    if (a.st_ino != b.st_ino || a.st_dev != b.st_dev)
        return 1;
    off_t pos = lseek(fd, 0, SEEK_CUR);
    return pos > 0 && b.st_size < pos;
}

/* The Sandbox still exists with the same uid: 1; gone or replaced: 0; else an error (< 0). */
static int still_there(asb_client *client, const char *ns, const char *name, const char *uid)
{
    char *cur = NULL;
    int r = get_uid(client, ns, name, &cur, NULL, NULL);
    if (r == ASB_ENOTFOUND)
        return 0;
    if (r != ASB_OK)
        return r;
    int same = strcmp(cur, uid) == 0;
    free(cur);
    return same;
}

/* What one read is about: the files and when it ends. */
typedef struct log_read {
    asb_client *client;
    const char *ns, *name;
    char *uid;
    char *dir;  /* exists while the log is being written: main/ or the sandbox's directory */
    char *logp; /* the log; .1 is the older generation */
    char *oldp;
    char *exitp; /* main: the exit file, whose presence ends a follow; NULL for sandboxd */
    int follow;
    const volatile int *cancel;
} log_read;

/* The read loop: <log>.1 once, then <log>, following it as asked. */
static int read_loop(log_read *lr, sink *s)
{
    int fd = -1, r = ASB_OK;
    int seen_dir = access(lr->dir, F_OK) == 0, read_old = 0;
    long last_check = now_msec(CLOCK_MONOTONIC);
    for (;;) {
        if (fd < 0) {
            fd = open(lr->logp, O_RDONLY | O_CLOEXEC);
            if (fd < 0 && errno != ENOENT) {
                r = open_failed(lr->logp);
                break;
            }
            /* The first time: the previous generation first, once. */
            if (fd >= 0 && !read_old && (r = drain_path(lr->oldp, s)) != ASB_OK)
                break;
            read_old = read_old || fd >= 0;
        }
        /* Check for the end before draining, so that what was written before the exit file
         * is all read by the drain below. */
        int dir_now = access(lr->dir, F_OK) == 0;
        int exited = lr->exitp && access(lr->exitp, F_OK) == 0;
        int done = !lr->follow || exited || (seen_dir && !dir_now);
        seen_dir = seen_dir || dir_now;
        if (fd >= 0 && (r = drain(fd, lr->logp, s)) != ASB_OK)
            break;
        /* what was there when the read started is in: --tail delivers its last lines */
        if (s->lines && (r = log_lines_end_collect(s->lines)) != ASB_OK)
            break;
        if (lr->follow && exited && fd >= 0) {
            /* sandboxd records the exit once the pipe is read empty: give asb serve a moment
             * to append the last read. */
            sleep_ms(POLL_MS);
            if ((r = drain(fd, lr->logp, s)) != ASB_OK)
                break;
        }
        if (!done && fd >= 0 && rotated(fd, lr->logp)) {
            /* Rotated or truncated: the rest of the old file, then the current file anew. */
            if ((r = drain(fd, lr->logp, s)) != ASB_OK)
                break;
            close(fd);
            fd = -1;
            continue;
        }
        if (done) {
            if (fd < 0 && !lr->follow)
                r = asbi_error_set(ASB_ENOTFOUND, 0, "NoLog",
                                   "sandbox %s/%s has no main process log yet",
                                   lr->ns ? lr->ns : "default", lr->name);
            break;
        }
        if (lr->cancel && *lr->cancel) {
            r = asbi_error_set(ASB_ECANCELLED, 0, NULL, "cancelled");
            break;
        }
        if (now_msec(CLOCK_MONOTONIC) - last_check >= RECHECK_MS) {
            last_check = now_msec(CLOCK_MONOTONIC);
            int k = still_there(lr->client, lr->ns, lr->name, lr->uid);
            if (k <= 0) { /* deleted: what was logged has been delivered */
                r = k;
                break;
            }
        }
        sleep_ms(POLL_MS);
    }
    if (fd >= 0)
        close(fd);
    if (r == ASB_OK && s->lines)
        r = log_lines_flush(s->lines);
    return r;
}

/* Which log: the main process's (container NULL or its name) or sandboxd's, this run's or the
 * previous one's. Sets the paths of lr; ASB_OK or an error (set). */
static int pick_log(log_read *lr, const char *state_dir, const asb_sandbox_logs_options *o,
                    const char *ctr_name, int has_cmd)
{
    size_t n = strlen(state_dir);
    while (n > 1 && state_dir[n - 1] == '/')
        n--;
    const char *c = o ? o->container : NULL;
    int sandboxd = c && strcmp(c, "sandboxd") == 0;
    if (c && !sandboxd && (!ctr_name || strcmp(c, ctr_name) != 0))
        return asbi_error_set(ASB_ENOTFOUND, 0, "NoContainer",
                              "container %s is not valid for sandbox %s", c, lr->name);
    const char *prev = o && o->previous ? ".previous" : "";
    if (asprintf(&lr->dir, "%.*s/sandboxes/%s%s", (int)n, state_dir, lr->uid,
                 sandboxd ? "" : "/main") < 0)
        lr->dir = NULL;
    if (asprintf(&lr->logp, "%.*s/sandboxes/%s/%s.log%s", (int)n, state_dir, lr->uid,
                 sandboxd ? "sandboxd" : "main", prev) < 0)
        lr->logp = NULL;
    if (!lr->logp || asprintf(&lr->oldp, "%s.1", lr->logp) < 0)
        lr->oldp = NULL;
    if (!sandboxd && (!lr->dir || asprintf(&lr->exitp, "%s/exit", lr->dir) < 0))
        lr->exitp = NULL;
    if (!lr->dir || !lr->logp || !lr->oldp || (!sandboxd && !lr->exitp))
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    if (*prev && access(lr->logp, F_OK) < 0)
        return asbi_error_set(ASB_ENOTFOUND, 0, "NoPrevious",
                              "previous terminated container \"%s\" in sandbox \"%s\" not found",
                              sandboxd ? "sandboxd" : ctr_name ?: "main", lr->name);
    struct stat st;
    if (sandboxd || *prev || stat(lr->dir, &st) == 0)
        return ASB_OK;
    if (errno != ENOENT)
        return asbi_error_set(errno == EACCES ? ASB_EFORBIDDEN : ASB_ECONFIG, 0, NULL,
                              "cannot read %s: %s", lr->dir, strerror(errno));
    if (!has_cmd)
        return asbi_error_set(ASB_ENOTFOUND, 0, "NoMainProcess",
                              "sandbox %s/%s has no main process (its container has no command)",
                              lr->ns ? lr->ns : "default", lr->name);
    return ASB_OK; /* not created yet (the reconciler makes it before starting the container) */
}

ASB_PUBLIC int asb_sandbox_logs(asb_client *client, const char *ns, const char *name,
                                const asb_sandbox_logs_options *opts, asb_sandbox_data_cb cb,
                                void *payload)
{
    if (!client || !name || !*name || !cb)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_logs: NULL client, name or cb");
    if (opts && (opts->version == 0 || opts->version > ASB_SANDBOX_LOGS_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_logs_options: unknown version %u",
                              opts->version);
    if (!client->state_dir || !*client->state_dir)
        return asbi_error_set(ASB_ECONFIG, 0, NULL,
                              "no state directory: the logs are read from the host");
    const asb_sandbox_logs_options *v2 = opts && opts->version >= 2 ? opts : NULL;
    log_read lr = {.client = client,
                   .ns = ns,
                   .name = name,
                   .follow = opts && opts->follow && !(v2 && v2->previous),
                   .cancel = opts ? opts->cancel : NULL};
    char *ctr_name = NULL;
    int has_cmd = 0;
    int r = get_uid(client, ns, name, &lr.uid, &has_cmd, &ctr_name);
    if (r == ASB_OK)
        r = pick_log(&lr, client->state_dir, v2, ctr_name, has_cmd);
    log_lines lines = {.cb = cb, .payload = payload, .line_ns = -1, .tail = -1};
    sink s = {.cb = cb, .payload = payload};
    if (r == ASB_OK && v2 && (v2->tail_lines >= 0 || v2->since_seconds > 0 || v2->timestamps)) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        lines.timestamps = v2->timestamps;
        lines.tail = v2->tail_lines;
        lines.collecting = v2->tail_lines >= 0;
        if (v2->since_seconds > 0)
            lines.since_ns = ((int64_t)now.tv_sec - v2->since_seconds) * 1000000000LL + now.tv_nsec;
        s.lines = &lines;
    }
    if (r == ASB_OK)
        r = read_loop(&lr, &s);
    log_lines_done(&lines);
    log_times_done(&s.times);
    free(ctr_name);
    free(lr.uid);
    free(lr.dir);
    free(lr.logp);
    free(lr.oldp);
    free(lr.exitp);
    return r;
}
