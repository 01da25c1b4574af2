/* Session storage: <data_dir>/<session>/sessions/latest.jsonl, one chat message per line,
 * append-only (upstream's format, so sessions move between the two CLIs). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent-internal.h"
#include "basic/fs-util.h"
#include "basic/io-util.h"
#include "basic/macro.h"
#include "shared/json-util.h"

int agent_session_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 1 || n > 40)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
            return 0;
    return 1;
}

int agent_store_session_dir(const agent_config *cfg, const char *session, char **ret)
{
    *ret = NULL;
    if (!agent_session_name_valid(session))
        return -EINVAL;
    int r;
    if (cfg && cfg->data_dir)
        r = asprintf(ret, "%s/%s", cfg->data_dir, session);
    else {
        const char *home = getenv("HOME");
        if (!home || !*home)
            return -ENOENT;
        r = asprintf(ret, "%s/.local/sandboxed-tools/%s", home, session);
    }
    return r < 0 ? -ENOMEM : 0;
}

int agent_store_load(const char *session_dir, json_t **ret, char **ret_error)
{
    *ret = NULL;
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/sessions/latest.jsonl", session_dir) < 0)
        return -ENOMEM;
    json_t *arr = json_array();
    if (!arr)
        return -ENOMEM;
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT) {
            *ret = arr;
            return 0;
        }
        int e = -errno;
        json_decref(arr);
        return agent_fail(ret_error, e, "cannot read %s: %s", path, strerror(-e));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned lineno = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (n == 0 || line[0] == '\n')
            continue;
        json_error_t jerr;
        json_t *m = json_loadb(line, (size_t)n, 0, &jerr);
        if (!json_is_object(m)) {
            json_decref(m);
            free(line);
            json_decref(arr);
            return agent_fail(ret_error, -EBADMSG, "%s:%u: not a JSON message: %s", path, lineno,
                              jerr.text);
        }
        json_array_append_new(arr, m);
    }
    free(line);
    *ret = arr;
    return 0;
}

int agent_store_append(const char *session_dir, json_t *message, char **ret_error)
{
    _cleanup_free_ char *dir = NULL, *path = NULL;
    if (asprintf(&dir, "%s/sessions", session_dir) < 0 ||
        asprintf(&path, "%s/latest.jsonl", dir) < 0)
        return -ENOMEM;
    int r = mkdir_p(dir, 0700);
    if (r < 0)
        return agent_fail(ret_error, r, "cannot create %s: %s", dir, strerror(-r));
    size_t len;
    _cleanup_free_ char *line = json_dumps_line(message, JSON_COMPACT, &len);
    if (!line)
        return -ENOMEM;
    _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return agent_fail(ret_error, -errno, "cannot open %s: %s", path, strerror(errno));
    r = loop_write(fd, line, len);
    if (r < 0)
        return agent_fail(ret_error, r, "cannot write %s: %s", path, strerror(-r));
    return 0;
}

int agent_session_exists(const agent_config *cfg, const char *name)
{
    _cleanup_free_ char *dir = NULL, *path = NULL;
    if (agent_store_session_dir(cfg, name, &dir) < 0)
        return 0;
    if (asprintf(&path, "%s/sessions/latest.jsonl", dir) < 0)
        return 0;
    return access(path, F_OK) == 0;
}

/* "PID PROGRAM" of the lock's holder, as it wrote it; "" when unreadable or not yet written. */
static void read_holder(int fd, char *buf, size_t n)
{
    ssize_t k = pread(fd, buf, n - 1, 0);
    buf[k > 0 ? k : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

int agent_store_lock(const char *session_dir, const char *session, int *ret_fd, char **ret_error)
{
    *ret_fd = -1;
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/lock", session_dir) < 0)
        return -ENOMEM;
    int r = mkdir_p(session_dir, 0700);
    if (r < 0)
        return agent_fail(ret_error, r, "cannot create %s: %s", session_dir, strerror(-r));
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return agent_fail(ret_error, -errno, "cannot open %s: %s", path, strerror(errno));
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK)
            return agent_fail(ret_error, -errno, "cannot lock %s: %s", path, strerror(errno));
        char holder[128];
        long pid = 0;
        char prog[64] = "";
        /* The holder writes its name just after taking the lock: give it a moment. */
        for (int tries = 0; tries < 50; tries++) {
            read_holder(fd, holder, sizeof(holder));
            if (sscanf(holder, "%ld %63s", &pid, prog) == 2)
                break;
            nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
        }
        if (sscanf(holder, "%ld %63s", &pid, prog) == 2)
            return agent_fail(ret_error, -EBUSY,
                              "session \"%s\" is in use by %s (pid %ld); one process at a time "
                              "may use a session (lock: %s)",
                              session, prog, pid, path);
        return agent_fail(ret_error, -EBUSY,
                          "session \"%s\" is in use by another process (lock: %s)", session, path);
    }
    /* The holder's identity, for the error a second user gets. The lock goes with the fd (and the
     * process): a crashed holder leaves a stale text but never a held lock. */
    char me[128];
    int n = snprintf(me, sizeof(me), "%ld %s\n", (long)getpid(), program_invocation_short_name);
    if (ftruncate(fd, 0) < 0 || pwrite(fd, me, (size_t)n, 0) != n)
        return agent_fail(ret_error, -errno, "cannot write %s: %s", path, strerror(errno));
    *ret_fd = TAKE_FD(fd);
    return 0;
}
