/* asb_sandbox_logs(): the main process's output. Its stdout and stderr are one pipe that
 * `asb serve` reads into $STATE/sandboxes/<uid>/main.log, a host file only asb serve writes,
 * rotated to main.log.1 past its cap; sandboxd records the exit code in /.asb/main/exit in the
 * container, which is $STATE/sandboxes/<uid>/main/exit on the host (docs/local-sandboxes.md).
 * The log is read straight from the host file: it has to stay readable when the main process
 * (and so possibly the sandbox) has finished. A full read is main.log.1 then main.log; follow
 * mode goes on with main.log and opens it again when it is rotated (a new inode). */
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
#include "shared/status.h"

#define POLL_MS 100
#define RECHECK_MS 1000

/* The Sandbox's metadata.uid, and whether its (first) container has a command or args, which
 * is what makes the control plane run a main process. */
static int get_uid(asb_client *client, const char *ns, const char *name, char **ret_uid,
                   int *ret_has_cmd)
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
    if (ret_has_cmd) {
        json_t *ctr = api_pod_template_container0(api_pod_template_of(obj));
        *ret_has_cmd = json_array_size(json_object_get(ctr, "command")) > 0 ||
                       json_array_size(json_object_get(ctr, "args")) > 0;
    }
    json_decref(obj);
    return r;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Copies fd from its offset to EOF to cb. ASB_OK, cb's non-zero value, or an error (set). */
static int drain(int fd, asb_sandbox_data_cb cb, void *payload)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return asbi_error_set(ASB_ERROR, 0, NULL, "cannot read the main process log: %s",
                                  strerror(errno));
        if (n == 0)
            return ASB_OK;
        int r = cb(buf, (size_t)n, payload);
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

/* Copies the whole file at path (if any) to cb. */
static int drain_path(const char *path, asb_sandbox_data_cb cb, void *payload)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? ASB_OK : open_failed(path);
    int r = drain(fd, cb, payload);
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
    int r = get_uid(client, ns, name, &cur, NULL);
    if (r == ASB_ENOTFOUND)
        return 0;
    if (r != ASB_OK)
        return r;
    int same = strcmp(cur, uid) == 0;
    free(cur);
    return same;
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
    int follow = opts && opts->follow;
    const volatile int *cancel = opts ? opts->cancel : NULL;
    char *uid = NULL, *dir = NULL, *logp = NULL, *oldp = NULL, *exitp = NULL;
    int fd = -1, has_cmd = 0;
    int r = get_uid(client, ns, name, &uid, &has_cmd);
    if (r != ASB_OK)
        return r;
    size_t n = strlen(client->state_dir);
    while (n > 1 && client->state_dir[n - 1] == '/')
        n--;
    if (asprintf(&dir, "%.*s/sandboxes/%s/main", (int)n, client->state_dir, uid) < 0)
        dir = NULL;
    if (asprintf(&logp, "%.*s/sandboxes/%s/main.log", (int)n, client->state_dir, uid) < 0)
        logp = NULL;
    if (!logp || asprintf(&oldp, "%s.1", logp) < 0)
        oldp = NULL;
    if (!dir || asprintf(&exitp, "%s/exit", dir) < 0)
        exitp = NULL;
    if (!dir || !logp || !oldp || !exitp) {
        r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        goto out;
    }
    struct stat st;
    if (stat(dir, &st) < 0) {
        if (errno != ENOENT) {
            r = asbi_error_set(errno == EACCES ? ASB_EFORBIDDEN : ASB_ECONFIG, 0, NULL,
                               "cannot read %s: %s", dir, strerror(errno));
            goto out;
        }
        if (!has_cmd) {
            r = asbi_error_set(ASB_ENOTFOUND, 0, "NoMainProcess",
                               "sandbox %s/%s has no main process (its container has no command)",
                               ns ? ns : "default", name);
            goto out;
        }
        /* Not created yet (the reconciler makes it before starting the container). */
    }
    int seen_dir = access(dir, F_OK) == 0, read_old = 0;
    long last_check = now_msec(CLOCK_MONOTONIC);
    for (;;) {
        if (fd < 0) {
            fd = open(logp, O_RDONLY | O_CLOEXEC);
            if (fd < 0 && errno != ENOENT) {
                r = open_failed(logp);
                goto out;
            }
            /* The first time: the previous generation first, once. */
            if (fd >= 0 && !read_old && (r = drain_path(oldp, cb, payload)) != ASB_OK)
                goto out;
            read_old = read_old || fd >= 0;
        }
        /* Check for the end before draining, so that what was written before the exit file
         * is all read by the drain below. */
        int dir_now = access(dir, F_OK) == 0;
        int exited = access(exitp, F_OK) == 0;
        int done = !follow || exited || (seen_dir && !dir_now);
        seen_dir = seen_dir || dir_now;
        if (fd >= 0 && (r = drain(fd, cb, payload)) != ASB_OK)
            goto out;
        if (follow && exited && fd >= 0) {
            /* sandboxd records the exit once the pipe is read empty: give asb serve a moment
             * to append the last read. */
            sleep_ms(POLL_MS);
            if ((r = drain(fd, cb, payload)) != ASB_OK)
                goto out;
        }
        if (!done && fd >= 0 && rotated(fd, logp)) {
            /* Rotated or truncated: the rest of the old file, then the current file anew. */
            if ((r = drain(fd, cb, payload)) != ASB_OK)
                goto out;
            close(fd);
            fd = -1;
            continue;
        }
        if (done) {
            if (fd < 0 && !follow)
                r = asbi_error_set(ASB_ENOTFOUND, 0, "NoLog",
                                   "sandbox %s/%s has no main process log yet", ns ? ns : "default",
                                   name);
            goto out;
        }
        if (cancel && *cancel) {
            r = asbi_error_set(ASB_ECANCELLED, 0, NULL, "cancelled");
            goto out;
        }
        if (now_msec(CLOCK_MONOTONIC) - last_check >= RECHECK_MS) {
            last_check = now_msec(CLOCK_MONOTONIC);
            int k = still_there(client, ns, name, uid);
            if (k < 0) {
                r = k;
                goto out;
            }
            if (k == 0) { /* deleted: what was logged has been delivered */
                r = ASB_OK;
                goto out;
            }
        }
        sleep_ms(POLL_MS);
    }
out:
    if (fd >= 0)
        close(fd);
    free(uid);
    free(dir);
    free(logp);
    free(oldp);
    free(exitp);
    return r;
}
