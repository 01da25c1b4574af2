/* A session's sandbox: one Sandbox (or SandboxClaim with -pool) named after the session, created
 * on the first tool call, reused while it exists (also by a restarted CLI), kept alive by pushing
 * shutdownTime to now+5 min on every tool call (shutdownPolicy Delete collects an idle one), and
 * recreated with the newest home-directory backup restored when it has gone. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <asb/client.h>
#include <asb/sandbox.h>

#include "agent/agent-internal.h"
#include "basic/buf.h"
#include "basic/io-util.h"
#include "basic/macro.h"
#include "basic/time-util.h"

#define READY_TIMEOUT_MS (180L * 1000)
#define MAX_OUTPUT (256u << 20)
#define RUN_MARKER "SANDBOXED_TOOLS_RUN"
#define KILL_MARKED                                                                                \
    "for e in /proc/[0-9]*/environ; do "                                                           \
    "if grep -qzxF \"" RUN_MARKER "=$1\" \"$e\" 2>/dev/null; then "                                \
    "p=${e#/proc/}; kill -KILL \"${p%/environ}\" 2>/dev/null; fi; done; exit 0"

struct agent_box {
    const agent_config *cfg;
    char *session;
    char *image;
    char *homedir;
    bool home_checked; /* pool_fix_homedir() ran for this sandbox */
    char *ns;
    char *backup_dir;
    char *fork_from;       /* -fork-from: the seed session, until the first sandbox is made */
    char *fork_backup_dir; /* the seed's fs/: backups to start from when it has no sandbox */
    char *name; /* the Sandbox's name (differs from the session with a pool) */
    asb_client *client;
    asb_sandbox *sb;
    bool toolbox_uploaded;
};

void agent_exec_result_clear(agent_exec_result *r)
{
    free(r->out);
    free(r->err);
    *r = (agent_exec_result){0};
}

static void box_log(agent_box *b, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void box_log(agent_box *b, int level, const char *fmt, ...)
{
    if (!b->cfg->log_cb)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) >= 0) {
        b->cfg->log_cb(level, m, b->cfg->log_payload);
        free(m);
    }
    va_end(ap);
}

/* libasb's error as -errno plus a message "<what>: <message>". */
static int asb_fail(char **ret_error, int code, const char *what)
{
    const asb_error *e = asb_error_last();
    const char *m = e && e->message && *e->message ? e->message : asb_strerror(code);
    int r;
    switch (code) {
    case ASB_ENOTFOUND:
        r = -ENOENT;
        break;
    case ASB_ECANCELLED:
        r = -ECANCELED;
        break;
    case ASB_ETIMEOUT:
        r = -ETIMEDOUT;
        break;
    case ASB_ENOMEM:
        r = -ENOMEM;
        break;
    case ASB_ECONNECT:
        r = -ENOTCONN;
        break;
    case ASB_EEXISTS:
        r = -EEXIST;
        break;
    default:
        r = -EIO;
    }
    return agent_fail(ret_error, r, "%s: %s", what, m);
}

int agent_box_new(agent_box **ret, const agent_config *cfg, const char *session,
                  const char *image, const char *backup_dir, char **ret_error)
{
    agent_box *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->cfg = cfg;
    b->session = strdup(session);
    b->image = strdup(image ? image : AGENT_DEFAULT_IMAGE);
    b->homedir = strdup(cfg->homedir && *cfg->homedir ? cfg->homedir : AGENT_DEFAULT_HOMEDIR);
    b->ns = strdup(cfg->ns && *cfg->ns ? cfg->ns : "default");
    b->backup_dir = strdup(backup_dir);
    if (cfg->fork_from && !cfg->pool) {
        _cleanup_free_ char *seed_dir = NULL;
        b->fork_from = strdup(cfg->fork_from);
        if (agent_store_session_dir(cfg, cfg->fork_from, &seed_dir) < 0 ||
            asprintf(&b->fork_backup_dir, "%s/fs", seed_dir) < 0)
            b->fork_backup_dir = NULL;
    }
    if (!b->session || !b->image || !b->homedir || !b->ns || !b->backup_dir ||
        (cfg->fork_from && !cfg->pool && (!b->fork_from || !b->fork_backup_dir))) {
        agent_box_free(b);
        return -ENOMEM;
    }
    *ret = b;
    return 0;
}

agent_box *agent_box_free(agent_box *b)
{
    if (!b)
        return NULL;
    asb_sandbox_free(b->sb);
    asb_client_free(b->client);
    free(b->session);
    free(b->image);
    free(b->homedir);
    free(b->ns);
    free(b->backup_dir);
    free(b->fork_from);
    free(b->fork_backup_dir);
    free(b->name);
    free(b);
    return NULL;
}

const char *agent_box_name(const agent_box *b)
{
    return b ? b->name : NULL;
}

static void shutdown_time(char *out, size_t n)
{
    time_t t = time(NULL) + AGENT_TTL_SECONDS;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int ensure_client(agent_box *b, char **ret_error)
{
    if (b->client)
        return 0;
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.server = b->cfg->server;
    o.token = b->cfg->token;
    o.state_dir = b->cfg->state_dir;
    int r = asb_client_new(&b->client, &o);
    if (r != ASB_OK)
        return asb_fail(ret_error, r, "control plane");
    return 0;
}

static int create_object(agent_box *b, const char *when, char **ret_error)
{
    json_t *obj;
    if (b->cfg->pool)
        obj = json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}, s:{s:s, s:s}}}", "apiVersion",
                        "extensions.agents.x-k8s.io/v1beta1", "kind", "SandboxClaim", "metadata",
                        "name", b->session, "spec", "warmPoolRef", "name", b->cfg->pool,
                        "lifecycle", "shutdownTime", when, "shutdownPolicy", "Delete");
    else
        obj = json_pack(
            "{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:{s:{s:[{s:s, s:s, s:[{s:s, s:s}], "
            "s:[{s:s, s:s}]}], s:s, s:b}}, s:[{s:{s:s}, s:{s:[s], s:{s:{s:s}}}}], s:s, s:s}}",
            "apiVersion", "agents.x-k8s.io/v1beta1", "kind", "Sandbox", "metadata", "name",
            b->session, "labels", "app.kubernetes.io/managed-by", "sandboxed-tools", "spec",
            "podTemplate", "spec", "containers", "name", "sandbox", "image", b->image, "env",
            "name", "HOME", "value", b->homedir, "volumeMounts", "name", "home", "mountPath",
            b->homedir, "restartPolicy", "Never", "automountServiceAccountToken", 0,
            "volumeClaimTemplates", "metadata", "name", "home", "spec", "accessModes",
            "ReadWriteOnce", "resources", "requests", "storage", "1Gi", "shutdownTime", when,
            "shutdownPolicy", "Delete");
    if (!obj)
        return -ENOMEM;
    char *s = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (!s)
        return -ENOMEM;
    int r = asb_object_create(NULL, b->client, b->cfg->pool ? "SandboxClaim" : "Sandbox", b->ns, s);
    free(s);
    if (r == ASB_EEXISTS)
        return 0; /* raced with another CLI of the same session: use it */
    if (r != ASB_OK)
        return asb_fail(ret_error, r, b->cfg->pool ? "create SandboxClaim" : "create Sandbox");
    return 0;
}

/* Pushes shutdownTime; -ENOENT when the object does not exist. */
static int extend(agent_box *b, const char *when, char **ret_error)
{
    json_t *p = b->cfg->pool
                    ? json_pack("{s:{s:{s:s}}}", "spec", "lifecycle", "shutdownTime", when)
                    : json_pack("{s:{s:s}}", "spec", "shutdownTime", when);
    char *s = p ? json_dumps(p, JSON_COMPACT) : NULL;
    json_decref(p);
    if (!s)
        return -ENOMEM;
    int r = asb_object_patch(NULL, b->client, b->cfg->pool ? "SandboxClaim" : "Sandbox", b->ns,
                             b->session, s, 0);
    free(s);
    if (r != ASB_OK)
        return asb_fail(ret_error, r, "extend shutdownTime");
    return 0;
}

/* A claim's Ready reasons on which upstream's SDKs stop waiting (UPSTREAM.md §5.2: the missing
 * template or pool, and the terminal reasons of §2.8). */
static bool claim_reason_fatal(const char *reason)
{
    static const char *const fatal[] = {"TemplateNotFound",
                                        "WarmPoolNotFound",
                                        "InvalidMetadata",
                                        "EnvVarsInjectionRejected",
                                        "VolumeClaimTemplatesError",
                                        "ClaimExpired",
                                        "SandboxExpired"};
    for (size_t i = 0; reason && i < sizeof(fatal) / sizeof(fatal[0]); i++)
        if (strcmp(reason, fatal[i]) == 0)
            return true;
    return false;
}

/* -EINVAL with a message when the claim's Ready condition is False with a fatal reason. */
static int claim_check_fatal(agent_box *b, char **ret_error)
{
    char *text = NULL;
    if (asb_object_get(&text, b->client, "SandboxClaim", b->ns, b->session) != ASB_OK)
        return 0;
    json_t *o = json_loads(text, 0, NULL);
    asb_free(text);
    json_t *conds = json_object_get(json_object_get(o, "status"), "conditions");
    int r = 0;
    for (size_t i = 0; i < json_array_size(conds); i++) {
        json_t *c = json_array_get(conds, i);
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *st = json_string_value(json_object_get(c, "status"));
        const char *reason = json_string_value(json_object_get(c, "reason"));
        const char *msg = json_string_value(json_object_get(c, "message"));
        if (type && strcmp(type, "Ready") == 0 && st && strcmp(st, "False") == 0 &&
            claim_reason_fatal(reason))
            r = agent_fail(ret_error, -EINVAL, "claim %s/%s failed: %s: %s", b->ns, b->session,
                           reason, msg ? msg : "");
    }
    json_decref(o);
    return r;
}

static int wait_ready(agent_box *b, const volatile int *cancel, char **ret_error)
{
    asb_wait_options w = ASB_WAIT_OPTIONS_INIT;
    w.timeout_ms = READY_TIMEOUT_MS;
    w.cancel = cancel;
    char *obj = NULL;
    const char *kind = b->cfg->pool ? "SandboxClaim" : "Sandbox";
    int r;
    if (b->cfg->pool) {
        /* Wait in slices and fail fast on a missing pool or template or a terminal reason, as
         * upstream's SDKs do, instead of sitting out the whole timeout. */
        w.timeout_ms = 1000;
        for (long waited = 0;; waited += w.timeout_ms) {
            r = asb_object_wait_condition(&obj, b->client, kind, b->ns, b->session, "Ready", NULL,
                                          &w);
            if (r != ASB_ETIMEOUT || waited + w.timeout_ms >= READY_TIMEOUT_MS)
                break;
            int f = claim_check_fatal(b, ret_error);
            if (f < 0)
                return f;
        }
    } else
        r = asb_object_wait_condition(&obj, b->client, kind, b->ns, b->session, "Ready", NULL, &w);
    if (r != ASB_OK)
        return asb_fail(ret_error, r, b->cfg->pool ? "wait for the claim" : "wait for the sandbox");
    free(b->name);
    b->name = NULL;
    json_t *o = json_loads(obj, 0, NULL);
    asb_free(obj);
    const char *name = b->cfg->pool ? json_string_value(json_object_get(
                                          json_object_get(json_object_get(o, "status"), "sandbox"),
                                          "name"))
                                    : b->session;
    b->name = name ? strdup(name) : NULL;
    json_decref(o);
    if (!b->name)
        return agent_fail(ret_error, -EPROTO, "claim %s is Ready but names no sandbox", b->session);
    return 0;
}

/* A claim that already names its sandbox (a restarted CLI): open that sandbox directly. A claim's
 * forwarded Ready condition may lag behind our own spec patch (observedGeneration), so waiting on
 * it would wait for the controller for no reason. */
static int open_bound(agent_box *b)
{
    char *obj = NULL;
    if (asb_object_get(&obj, b->client, "SandboxClaim", b->ns, b->session) != ASB_OK)
        return -ENOENT;
    json_t *o = json_loads(obj, 0, NULL);
    asb_free(obj);
    const char *name = json_string_value(
        json_object_get(json_object_get(json_object_get(o, "status"), "sandbox"), "name"));
    int r = -ENOENT;
    if (name) {
        asb_sandbox_options so = ASB_SANDBOX_OPTIONS_INIT;
        if (asb_sandbox_open(&b->sb, b->client, b->ns, name, &so) == ASB_OK) {
            free(b->name);
            b->name = strdup(name);
            r = b->name ? 0 : -ENOMEM;
        }
    }
    json_decref(o);
    return r;
}

static int box_exec(agent_box *b, const char *const *argv, const char *stdin_data, size_t stdin_len,
                    int in_fd, int out_fd, long timeout_ms, const volatile int *cancel,
                    agent_exec_result *ret, char **ret_error);

/* A thread converting between a backup file and a plain tar on one end of a socketpair: the
 * sandbox's tar reads or writes the other end through box_exec(), so a snapshot or restore of
 * any size needs a few blocks of memory. */
typedef struct backup_pump {
    const char *path;
    int fd;
    bool to_file; /* snapshot: socket -> path; restore: path -> socket */
    int result;
    char *error;
    pthread_t thread;
} backup_pump;

static void *pump_main(void *ud)
{
    backup_pump *p = ud;
    p->result = p->to_file ? agent_backup_write_fd(p->path, p->fd, &p->error)
                           : agent_backup_read_fd(p->path, p->fd, &p->error);
    /* Unblocks box_exec's side: the sandbox's output is discarded, its input ends. */
    shutdown(p->fd, p->to_file ? SHUT_RDWR : SHUT_WR);
    return NULL;
}

/* Starts the pump on sv[0]; *ret_fd is the other end for box_exec (closed by pump_finish). */
static int pump_start(backup_pump *p, const char *path, bool to_file, int *ret_fd)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    *p = (backup_pump){.path = path, .fd = sv[0], .to_file = to_file};
    int r = pthread_create(&p->thread, NULL, pump_main, p);
    if (r != 0) {
        close(sv[0]);
        close(sv[1]);
        return -r;
    }
    *ret_fd = sv[1];
    return 0;
}

/* Ends box_exec's side (EOF for the pump's reader, EPIPE for its writer), waits for the pump. */
static int pump_finish(backup_pump *p, int fd)
{
    shutdown(fd, SHUT_RDWR);
    pthread_join(p->thread, NULL);
    close(fd);
    close(p->fd);
    return p->result;
}

/* Restores the newest backup of dir (the session's own, or a seed's) into the home directory. */
static int restore(agent_box *b, const char *dir, const volatile int *cancel)
{
    _cleanup_free_ char *latest = NULL, *err = NULL;
    int r = agent_backup_latest(dir, &latest);
    if (r < 0 || !latest)
        return r;
    backup_pump pump;
    int fd;
    r = pump_start(&pump, latest, false, &fd);
    if (r < 0)
        return r;
    /* -p: modes exactly as stored (the sandbox user is not root, so tar would apply its umask). */
    const char *argv[] = {"tar", "-xpf", "-", "-C", b->homedir, NULL};
    agent_exec_result res = {0};
    r = box_exec(b, argv, NULL, 0, fd, -1, 0, cancel, &res, &err);
    int pr = pump_finish(&pump, fd);
    if (pr < 0) {
        box_log(b, AGENT_LOG_WARNING, "restore of %s failed: %s", latest,
                pump.error ? pump.error : strerror(-pr));
        free(pump.error);
        agent_exec_result_clear(&res);
        return pr;
    }
    free(pump.error);
    if (r == 0 && res.exit_code != 0)
        box_log(b, AGENT_LOG_WARNING, "restore of %s: tar exited %d: %s", latest, res.exit_code,
                res.err ? res.err : "");
    else if (r < 0)
        box_log(b, AGENT_LOG_WARNING, "restore of %s failed: %s", latest, err ? err : "");
    else
        box_log(b, AGENT_LOG_INFO, "restored %s into sandbox %s", latest, b->name);
    agent_exec_result_clear(&res);
    return r;
}

/* With -pool the sandbox comes from the pool's template, which may have nothing at the home
 * directory (no `home` volume) and a read-only root where it cannot be created: agent_box_exec's
 * `cd "$HOME"` would then fail silently, tools would run in sandboxd's root and every snapshot
 * fail. Use the home directory when it is a writable directory after the wrapper's mkdir, else
 * sandboxd's root directory (where the tools ran anyway), and say so. */
static void pool_fix_homedir(agent_box *b, const volatile int *cancel)
{
    if (!b->cfg->pool || b->home_checked)
        return;
    const char *argv[] = {"/bin/sh", "-c",
                          "if [ -d \"$HOME\" ] && [ -w \"$HOME\" ]; then printf %s \"$HOME\"; "
                          "else pwd | tr -d '\\n'; fi",
                          NULL};
    agent_exec_result res = {0};
    _cleanup_free_ char *err = NULL;
    if (agent_box_exec(b, argv, NULL, 0, 0, cancel, &res, &err) == 0 && res.exit_code == 0 &&
        res.out && res.out[0] == '/' && !strchr(res.out, '\n')) {
        b->home_checked = true;
        if (strcmp(res.out, b->homedir) != 0) {
            box_log(b, AGENT_LOG_WARNING,
                    "home directory %s is not writable in sandbox %s (pool %s); using %s",
                    b->homedir, b->name ? b->name : "", b->cfg->pool, res.out);
            char *h = strdup(res.out);
            if (h) {
                free(b->homedir);
                b->homedir = h;
            }
        }
    }
    agent_exec_result_clear(&res);
}

const char *agent_box_homedir(const agent_box *b)
{
    return b->homedir;
}

/* The new session's first sandbox under -fork-from: a fork of the seed's sandbox (nothing to
 * restore then: *ret_restore_dir NULL), else a new one that starts with the seed's newest backup
 * (*ret_restore_dir the seed's fs/). Tried once: later sandboxes of the session are its own. */
static int create_fork(agent_box *b, const char *when, const volatile int *cancel,
                       const char **ret_restore_dir, char **ret_error)
{
    int r = agent_fork_sandbox(b->client, b->ns, b->fork_from, b->session, when, cancel, ret_error);
    if (r == 0) {
        box_log(b, AGENT_LOG_INFO, "sandbox %s is a fork of session %s's", b->session, b->fork_from);
        *ret_restore_dir = NULL;
    } else if (r == -ENOENT) {
        _cleanup_free_ char *latest = NULL;
        if (agent_backup_latest(b->fork_backup_dir, &latest) < 0 || !latest)
            return agent_fail(ret_error, -ENOENT,
                              "cannot fork session %s: it has neither a sandbox nor a backup in %s",
                              b->fork_from, b->fork_backup_dir);
        box_log(b, AGENT_LOG_WARNING, "session %s has no sandbox; starting from its backup %s",
                b->fork_from, latest);
        r = create_object(b, when, ret_error);
        *ret_restore_dir = b->fork_backup_dir;
    }
    if (r < 0)
        return r;
    free(b->fork_from);
    b->fork_from = NULL;
    return 0;
}

int agent_box_ensure(agent_box *b, const volatile int *cancel, char **ret_error)
{
    int r = ensure_client(b, ret_error);
    if (r < 0)
        return r;
    char when[32];
    for (int attempt = 0; attempt < 3; attempt++) {
        shutdown_time(when, sizeof(when));
        r = extend(b, when, ret_error);
        bool created = false;
        const char *restore_dir = b->backup_dir;
        if (r == -ENOENT) {
            asb_sandbox_free(b->sb);
            b->sb = NULL;
            b->toolbox_uploaded = false;
            b->home_checked = false;
            r = b->fork_from ? create_fork(b, when, cancel, &restore_dir, ret_error)
                             : create_object(b, when, ret_error);
            created = true;
        }
        if (r < 0)
            return r;
        if (b->sb && !created)
            return 0;
        if (!created && b->cfg->pool && open_bound(b) == 0) {
            pool_fix_homedir(b, cancel);
            return 0;
        }
        r = wait_ready(b, cancel, ret_error);
        if (r == -ENOENT)
            continue; /* expired and deleted while we waited: create a new one */
        if (r < 0)
            return r;
        asb_sandbox_options so = ASB_SANDBOX_OPTIONS_INIT;
        int ar = asb_sandbox_open(&b->sb, b->client, b->ns, b->name, &so);
        if (ar != ASB_OK)
            return asb_fail(ret_error, ar, "open sandbox");
        pool_fix_homedir(b, cancel);
        if (created) {
            box_log(b, AGENT_LOG_INFO, "created sandbox %s", b->name);
            if (restore_dir)
                restore(b, restore_dir, cancel);
        }
        return 0;
    }
    return agent_fail(ret_error, -EAGAIN, "sandbox %s keeps disappearing", b->session);
}

/* ---- exec ---- */

typedef struct exec_ctx {
    agent_box *b;
    agent_exec_result *res;
    const char *stdin_data;
    size_t stdin_len;
    int in_fd;  /* >= 0: stdin comes from this fd until EOF instead of stdin_data */
    int out_fd; /* >= 0: stdout goes to this socket instead of res->out */
    long timeout_ms;
    int pid;
    bool overflow;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    bool watchdog;
    const char *token;
    pthread_t thread;
    int stdin_error;
    bool sink_failed;
    buf out, err; /* what the process wrote, for res (out only when out_fd < 0) */
} exec_ctx;

static void *watchdog_main(void *ud)
{
    exec_ctx *c = ud;
    struct timespec dl = timespec_realtime_after((usec_t)c->timeout_ms * USEC_PER_MSEC);
    pthread_mutex_lock(&c->lock);
    int rc = 0;
    while (!c->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&c->cond, &c->lock, &dl);
    bool fire = !c->done;
    if (fire)
        c->res->timed_out = true;
    pthread_mutex_unlock(&c->lock);
    if (fire) {
        /* sandboxd signals the process group; processes that moved to their own group or
         * session (gemini's shell tool does) are found by the marker in their environment. */
        asb_sandbox_signal(c->b->sb, c->pid, SIGKILL);
        const char *argv[] = {"/bin/sh", "-c", KILL_MARKED, "sh", c->token, NULL};
        for (int i = 0; i < 2; i++) {
            asb_sandbox_result *kr = NULL;
            asb_sandbox_execute(&kr, c->b->sb, argv, NULL);
            asb_sandbox_result_free(kr);
        }
    }
    return NULL;
}

/* Appends to an output buffer of at most MAX_OUTPUT bytes. 0, -E2BIG or -ENOMEM. */
static int append(buf *b, const char *p, size_t n)
{
    return b->len + n > MAX_OUTPUT ? -E2BIG : buf_append(b, p, n);
}

/* Streams in_fd to the process's stdin in blocks, then closes it. */
static void stdin_from_fd(exec_ctx *c, int pid)
{
    const size_t chunk = 1u << 20;
    _cleanup_free_ char *block = malloc(chunk);
    if (!block) {
        c->stdin_error = ASB_ENOMEM;
        asb_sandbox_write_stdin(c->b->sb, pid, "", 0, 1);
        return;
    }
    for (;;) {
        size_t n = 0;
        bool eof = false;
        while (n < chunk) {
            ssize_t k = read(c->in_fd, block + n, chunk - n);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                eof = true;
                break;
            }
            n += (size_t)k;
        }
        int r = asb_sandbox_write_stdin(c->b->sb, pid, block, n, eof);
        if (r != ASB_OK) {
            c->stdin_error = r;
            return;
        }
        if (eof)
            return;
    }
}

static int on_init(int pid, void *ud)
{
    exec_ctx *c = ud;
    c->pid = pid;
    if (c->timeout_ms > 0 && pthread_create(&c->thread, NULL, watchdog_main, c) == 0)
        c->watchdog = true;
    if (c->in_fd >= 0) {
        stdin_from_fd(c, pid);
        return 0;
    }
    const size_t chunk = 1u << 20;
    size_t off = 0;
    do {
        size_t n = MIN(chunk, c->stdin_len - off);
        bool eof = off + n >= c->stdin_len;
        int r = asb_sandbox_write_stdin(c->b->sb, pid, c->stdin_data ? c->stdin_data + off : "", n,
                                        eof);
        if (r != ASB_OK) {
            c->stdin_error = r; /* the process may have exited already: not fatal */
            break;
        }
        off += n;
    } while (off < c->stdin_len);
    return 0;
}

static int on_stdout(const char *d, size_t n, void *ud)
{
    exec_ctx *c = ud;
    if (c->out_fd >= 0) {
        /* Blocks while the pump catches up (constant memory); once the pump has stopped reading
         * (done or failed) the rest is discarded. */
        if (!c->sink_failed && loop_send(c->out_fd, d, n) < 0)
            c->sink_failed = true;
        return 0;
    }
    if (append(&c->out, d, n) < 0)
        c->overflow = true;
    return 0;
}

static int on_stderr(const char *d, size_t n, void *ud)
{
    exec_ctx *c = ud;
    if (append(&c->err, d, n) < 0)
        c->overflow = true;
    return 0;
}

int agent_box_exec(agent_box *b, const char *const *argv, const char *stdin_data, size_t stdin_len,
                   long timeout_ms, const volatile int *cancel, agent_exec_result *ret,
                   char **ret_error)
{
    return box_exec(b, argv, stdin_data, stdin_len, -1, -1, timeout_ms, cancel, ret, ret_error);
}

static int box_exec(agent_box *b, const char *const *argv, const char *stdin_data, size_t stdin_len,
                    int in_fd, int out_fd, long timeout_ms, const volatile int *cancel,
                    agent_exec_result *ret, char **ret_error)
{
    *ret = (agent_exec_result){0};
    if (!b->sb)
        return agent_fail(ret_error, -ENOTCONN, "no sandbox");
    size_t n = 0;
    while (argv[n])
        n++;
    /* sandboxd confines cwd to its root directory, so the shell changes to $HOME itself. */
    const char **full = calloc(n + 5, sizeof(*full));
    if (!full)
        return -ENOMEM;
    full[0] = "/bin/sh";
    full[1] = "-c";
    full[2] = "mkdir -p \"$HOME\" 2>/dev/null; cd \"$HOME\" 2>/dev/null; exec \"$@\"";
    full[3] = "sh";
    for (size_t i = 0; i < n; i++)
        full[4 + i] = argv[i];
    _cleanup_free_ char *home_env = NULL;
    if (asprintf(&home_env, "HOME=%s", b->homedir) < 0) {
        free(full);
        return -ENOMEM;
    }
    static unsigned long seq;
    char token[64];
    snprintf(token, sizeof(token), "%ld.%lu.%lx", (long)getpid(),
             __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED), (unsigned long)random());
    _cleanup_free_ char *marker = NULL;
    if (asprintf(&marker, RUN_MARKER "=%s", token) < 0) {
        free(full);
        return -ENOMEM;
    }
    const char *env[] = {home_env, marker, NULL};
    asb_sandbox_process_options po = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    po.env = env;
    po.cancel = cancel;
    exec_ctx c = {.b = b,
                  .res = ret,
                  .stdin_data = stdin_data,
                  .stdin_len = stdin_len,
                  .in_fd = in_fd,
                  .out_fd = out_fd,
                  .timeout_ms = timeout_ms,
                  .pid = -1,
                  .token = token};
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.cond, NULL);
    asb_sandbox_callbacks cbs = ASB_SANDBOX_CALLBACKS_INIT;
    cbs.init_cb = on_init;
    cbs.stdout_cb = on_stdout;
    cbs.stderr_cb = on_stderr;
    cbs.payload = &c;
    int exit_code = -1;
    int ar = asb_sandbox_start(&exit_code, b->sb, full, &po, &cbs);
    pthread_mutex_lock(&c.lock);
    c.done = true;
    pthread_cond_broadcast(&c.cond);
    pthread_mutex_unlock(&c.lock);
    if (c.watchdog)
        pthread_join(c.thread, NULL);
    pthread_mutex_destroy(&c.lock);
    pthread_cond_destroy(&c.cond);
    free(full);
    ret->out = buf_steal(&c.out, &ret->out_len);
    ret->err = buf_steal(&c.err, &ret->err_len);
    if (!ret->out || !ret->err) {
        buf_done(&c.out);
        buf_done(&c.err);
        agent_exec_result_clear(ret);
        return -ENOMEM;
    }
    if (ar == ASB_ECANCELLED || (cancel && *cancel)) {
        agent_exec_result_clear(ret); /* callers do not clear on error */
        return agent_fail(ret_error, -ECANCELED, "cancelled");
    }
    if (ar != ASB_OK && !ret->timed_out) {
        agent_exec_result_clear(ret);
        int r = asb_fail(ret_error, ar, "run in sandbox");
        if (ar == ASB_ECONNECT) {
            asb_sandbox_free(b->sb); /* gone: the next ensure recreates it */
            b->sb = NULL;
        }
        return r;
    }
    ret->exit_code = exit_code;
    return 0;
}

int agent_box_upload(agent_box *b, const char *host_path, const char *path, unsigned int mode,
                     char **ret_error)
{
    if (b->toolbox_uploaded)
        return 0;
    _cleanup_fclose_ FILE *f = fopen(host_path, "re");
    if (!f)
        return agent_fail(ret_error, -errno, "cannot open %s: %s", host_path, strerror(errno));
    _cleanup_buf_ buf data = BUF_INIT;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if (append(&data, chunk, n) < 0)
            return -ENOMEM;
    /* The REST API is confined to the sandbox's root directory: stream it through a shell. */
    _cleanup_free_ char *script = NULL;
    if (asprintf(&script,
                 "d=$(dirname \"$1\"); mkdir -p \"$d\" && cat > \"$1.tmp\" && chmod %o \"$1.tmp\" "
                 "&& mv -f \"$1.tmp\" \"$1\"",
                 mode) < 0)
        return -ENOMEM;
    const char *argv[] = {"sh", "-c", script, "sh", path, NULL};
    agent_exec_result res = {0};
    int r = agent_box_exec(b, argv, data.data, data.len, 0, NULL, &res, ret_error);
    if (r == 0 && res.exit_code != 0)
        r = agent_fail(ret_error, -EIO, "cannot install %s in the sandbox: %s", path, res.err);
    agent_exec_result_clear(&res);
    if (r == 0)
        b->toolbox_uploaded = true;
    return r;
}

/* A new backup path in backup_dir for now: backup-<stamp>.tar.gz, or _NN after the highest
 * index present when several snapshots fall within one second ("_NN" sorts after "." and keeps
 * name order = time order; rotation deletes the oldest names, and reusing a free slot would sort
 * the newest snapshot first). */
static int new_backup_path(agent_box *b, char **ret, char **ret_error)
{
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
    int next = 0;
    for (int i = 0; i < 100; i++) {
        _cleanup_free_ char *p = NULL;
        int rr = i == 0 ? asprintf(&p, "%s/backup-%s.tar.gz", b->backup_dir, stamp)
                        : asprintf(&p, "%s/backup-%s_%02d.tar.gz", b->backup_dir, stamp, i);
        if (rr < 0)
            return -ENOMEM;
        struct stat st;
        if (stat(p, &st) == 0)
            next = i + 1;
    }
    if (next > 99)
        return agent_fail(ret_error, -EEXIST, "too many snapshots within one second in %s",
                          b->backup_dir);
    int rr = next == 0 ? asprintf(ret, "%s/backup-%s.tar.gz", b->backup_dir, stamp)
                       : asprintf(ret, "%s/backup-%s_%02d.tar.gz", b->backup_dir, stamp, next);
    return rr < 0 ? -ENOMEM : 0;
}

int agent_box_snapshot(agent_box *b, char **ret_error)
{
    if (!b->sb)
        return 0;
    int r = mkdir(b->backup_dir, 0700) < 0 && errno != EEXIST ? -errno : 0;
    if (r < 0)
        return agent_fail(ret_error, r, "cannot create %s: %s", b->backup_dir, strerror(-r));
    _cleanup_free_ char *path = NULL;
    r = new_backup_path(b, &path, ret_error);
    if (r < 0)
        return r;
    backup_pump pump;
    int fd;
    r = pump_start(&pump, path, true, &fd);
    if (r < 0)
        return agent_fail(ret_error, r, "cannot start the snapshot: %s", strerror(-r));
    const char *argv[] = {"tar", "-cf", "-", "-C", b->homedir, ".", NULL};
    agent_exec_result res = {0};
    r = box_exec(b, argv, NULL, 0, -1, fd, 0, NULL, &res, ret_error);
    int pr = pump_finish(&pump, fd);
    if (r == 0 && res.exit_code != 0)
        r = agent_fail(ret_error, -EIO, "tar in the sandbox exited %d: %s", res.exit_code, res.err);
    if (r == 0 && pr < 0)
        r = agent_fail(ret_error, pr, "%s", pump.error ? pump.error : strerror(-pr));
    free(pump.error);
    agent_exec_result_clear(&res);
    if (r < 0) {
        unlink(path);
        return r;
    }
    agent_backup_rotate(b->backup_dir, AGENT_BACKUPS_KEPT);
    return 0;
}
