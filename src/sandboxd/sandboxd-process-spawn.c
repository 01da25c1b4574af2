#include "sandboxd/sandboxd-process-spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "basic/confine.h"
#include "basic/macro.h"

extern char **environ;

static bool is_executable(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return false;
    return !S_ISDIR(st.st_mode) && (st.st_mode & 0111);
}

char *path_lookup(const char *name, const char *path_env)
{
    if (!name || !name[0] || !path_env) {
        errno = ENOENT;
        return NULL;
    }
    for (const char *p = path_env;;) {
        const char *end = strchrnul(p, ':');
        size_t dlen = (size_t)(end - p);
        char *full;
        if (asprintf(&full, "%.*s/%s", (int)(dlen ? dlen : 1), dlen ? p : ".", name) < 0) {
            errno = ENOMEM;
            return NULL;
        }
        if (is_executable(full))
            return full;
        free(full);
        if (*end == '\0')
            break;
        p = end + 1;
    }
    errno = ENOENT;
    return NULL;
}

static int build_env(spawn_cmd *c, const Process__V1__ProcessConfig *cfg)
{
    if (cfg->n_env_vars == 0) {
        c->envp = environ;
        return 0;
    }
    size_t n = 0;
    while (environ[n])
        n++;
    c->envp = calloc(n + cfg->n_env_vars + 1, sizeof(char *));
    c->env_owned = calloc(cfg->n_env_vars, sizeof(char *));
    c->env_built = true;
    if (!c->envp || !c->env_owned)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool overridden = false;
        for (size_t j = 0; j < cfg->n_env_vars && !overridden; j++) {
            const char *key = cfg->env_vars[j]->key;
            overridden = key && strlen(key) == klen && memcmp(key, environ[i], klen) == 0;
        }
        if (!overridden)
            c->envp[k++] = environ[i];
    }
    for (size_t j = 0; j < cfg->n_env_vars; j++) {
        const char *key = cfg->env_vars[j]->key ? cfg->env_vars[j]->key : "";
        const char *val = cfg->env_vars[j]->value ? cfg->env_vars[j]->value : "";
        /* A later duplicate key (not possible in a proto map) would simply repeat. */
        char *kv;
        if (asprintf(&kv, "%s=%s", key, val) < 0)
            return -ENOMEM;
        c->env_owned[c->n_env_owned++] = kv;
        c->envp[k++] = kv;
    }
    c->envp[k] = NULL;
    return 0;
}

int spawn_cmd_build(spawn_cmd *c, sandboxd *sd, const Process__V1__ProcessConfig *cfg,
                    api_error *err)
{
    if (!cfg || cfg->n_command == 0)
        return api_error_set(err, STATUS_INVALID_ARGUMENT, "command is required");
    const char *prog = cfg->command[0];
    if (!strchr(prog, '/')) {
        c->path = path_lookup(prog, getenv("PATH"));
        if (!c->path) {
            if (errno == ENOMEM)
                return api_error_set(err, STATUS_INTERNAL, "out of memory");
            return api_error_set(err, STATUS_NOT_FOUND,
                                 "command or path not found: exec: \"%s\": executable file not "
                                 "found in $PATH",
                                 prog);
        }
    } else {
        c->path = strdup(prog);
        if (!c->path)
            return api_error_set(err, STATUS_INTERNAL, "out of memory");
    }
    c->argv = calloc(cfg->n_command + 1, sizeof(char *));
    if (!c->argv)
        return api_error_set(err, STATUS_INTERNAL, "out of memory");
    for (size_t i = 0; i < cfg->n_command; i++)
        c->argv[i] = cfg->command[i];

    c->cwd = cfg->cwd && cfg->cwd[0] ? cfg->cwd : NULL;
    if (c->cwd) {
        int r = confine_open_dir(sd->root_fd, sd->root_path, c->cwd, &c->cwd_fd);
        if (r == -ERRNO_PATH_ESCAPE)
            return api_error_set(err, STATUS_PERMISSION_DENIED,
                                 "cwd: access denied: %s is outside the root directory", c->cwd);
        if (r == -ENOENT)
            c->cwd_errno = ENOENT;
        else if (r < 0)
            return api_error_set(err, STATUS_INTERNAL, "cwd: %s: %s", c->cwd, strerror(-r));
    }
    if (build_env(c, cfg) < 0)
        return api_error_set(err, STATUS_INTERNAL, "out of memory");
    return 0;
}

void spawn_cmd_done(spawn_cmd *c)
{
    free(c->path);
    free(c->argv);
    if (c->env_built)
        free(c->envp);
    for (size_t i = 0; i < c->n_env_owned; i++)
        free(c->env_owned[i]);
    free(c->env_owned);
    safe_close(c->cwd_fd);
    *c = (spawn_cmd)SPAWN_CMD_INIT;
}

/* Execute's stdin, opened once (a path lookup less in every child). */
static int dev_null_fd(void)
{
    static int fd = -1;
    if (fd < 0)
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd;
}

static int spawn_error(api_error *err, int e, const spawn_cmd *c, const char *verb)
{
    status_code code = e == ENOTDIR ? STATUS_NOT_FOUND : status_from_errno(e);
    if (code != STATUS_NOT_FOUND && code != STATUS_PERMISSION_DENIED)
        code = STATUS_INTERNAL;
    const char *what = strcmp(verb, "execute") == 0 ? "failed to execute command"
                                                    : "failed to start command";
    if (c->cwd_errno)
        return api_error_set(err, code, "%s: chdir %s: %s", what, c->cwd, strerror(e));
    return api_error_set(err, code, "%s: fork/exec %s: %s", what, c->path, strerror(e));
}

static int open_pty(int *ret_master, char *slave, size_t slave_len, unsigned cols, unsigned rows)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return -errno;
    if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, slave, slave_len) != 0) {
        int e = -errno;
        close(m);
        return e;
    }
    if (cols > 0 && rows > 0) {
        struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
        (void)ioctl(m, TIOCSWINSZ, &ws);
    }
    *ret_master = m;
    return 0;
}

int spawn_cmd_run(const spawn_cmd *c, sandboxd *sd, spawn_mode mode, unsigned cols, unsigned rows,
                  const char *verb, spawned *ret, api_error *err)
{
    *ret = (spawned){.pid = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1};
    if (c->cwd_errno)
        return spawn_error(err, c->cwd_errno, c, verb);

    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1}, master = -1;
    char slave[128];
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    int e = 0;

    posix_spawn_file_actions_addfchdir_np(&fa, c->cwd_fd >= 0 ? c->cwd_fd : sd->root_fd);
    if (mode == SPAWN_PTY) {
        e = -open_pty(&master, slave, sizeof(slave), cols, rows);
        if (e)
            goto out;
        posix_spawn_file_actions_addopen(&fa, 0, slave, O_RDWR, 0);
        posix_spawn_file_actions_adddup2(&fa, 0, 1);
        posix_spawn_file_actions_adddup2(&fa, 0, 2);
    } else {
        if ((mode == SPAWN_PIPES && pipe2(pin, O_CLOEXEC) < 0) || pipe2(pout, O_CLOEXEC) < 0 ||
            pipe2(perr, O_CLOEXEC) < 0) {
            e = errno;
            goto out;
        }
        int null_fd = mode == SPAWN_EXECUTE ? dev_null_fd() : -1;
        if (mode == SPAWN_PIPES)
            posix_spawn_file_actions_adddup2(&fa, pin[0], 0);
        else if (null_fd >= 0)
            posix_spawn_file_actions_adddup2(&fa, null_fd, 0);
        else
            posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
        posix_spawn_file_actions_adddup2(&fa, perr[1], 2);
    }

    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (mode == SPAWN_PTY) {
        flags |= POSIX_SPAWN_SETSID;
    } else {
        flags |= POSIX_SPAWN_SETPGROUP;
        posix_spawnattr_setpgroup(&attr, 0);
    }
    posix_spawnattr_setflags(&attr, flags);

    pid_t pid;
    e = posix_spawn(&pid, c->path, &fa, &attr, c->argv, c->envp);
    if (e)
        goto out;
    ret->pid = pid;
    /* Our ends become non-blocking when uv_poll_init() takes them. */
    if (mode == SPAWN_PTY) {
        ret->out_fd = ret->in_fd = TAKE_FD(master);
    } else {
        if (mode == SPAWN_PIPES)
            ret->in_fd = TAKE_FD(pin[1]);
        ret->out_fd = TAKE_FD(pout[0]);
        ret->err_fd = TAKE_FD(perr[0]);
    }
out:
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    safe_close(pin[0]);
    safe_close(pin[1]);
    safe_close(pout[0]);
    safe_close(pout[1]);
    safe_close(perr[0]);
    safe_close(perr[1]);
    safe_close(master);
    if (e)
        return spawn_error(err, e, c, verb);
    return 0;
}
