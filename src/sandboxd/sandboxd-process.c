#include "sandboxd/sandboxd-process.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

static void list_unlink(process_table *t, child *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        t->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

static child *find_pid(process_table *t, pid_t pid)
{
    for (child *c = t->head; c; c = c->next)
        if (c->pid == pid && !c->reaped)
            return c;
    return NULL;
}

int process_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return -1;
}

static void reap(process_table *t)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            break;
        child *c = find_pid(t, pid);
        if (!c)
            continue; /* an orphan we inherited as PID 1, or not ours */
        c->reaped = true;
        t->live--;
        c->ops->on_exit(c, status);
    }
}

static void on_sigchld(uv_signal_t *h, int signum)
{
    reap(h->data);
}

int process_table_init(process_table *t, uv_loop_t *loop)
{
    *t = (process_table){.loop = loop, .next_id = 1};
    int r = uv_signal_init(loop, &t->sigchld);
    if (r < 0)
        return r;
    t->sigchld.data = t;
    r = uv_signal_start(&t->sigchld, on_sigchld, SIGCHLD);
    if (r < 0)
        return r;
    /* Not a reason to keep the loop alive by itself. */
    uv_unref((uv_handle_t *)&t->sigchld);
    return 0;
}

int32_t process_table_next_id(process_table *t)
{
    int32_t id = t->next_id;
    t->next_id = id == INT32_MAX ? 1 : id + 1;
    return id;
}

void process_table_add(process_table *t, child *c)
{
    c->prev = NULL;
    c->next = t->head;
    if (t->head)
        t->head->prev = c;
    t->head = c;
    c->tracked = true;
    if (!c->reaped)
        t->live++;
}

static void remember_group(process_table *t, pid_t pgid)
{
    size_t k = 0;
    for (size_t i = 0; i < t->n_lingering; i++)
        if (kill(-t->lingering[i], 0) == 0 || errno != ESRCH)
            t->lingering[k++] = t->lingering[i];
    t->n_lingering = k;
    if (kill(-pgid, 0) < 0 && errno == ESRCH)
        return;
    if (t->n_lingering == t->cap_lingering) {
        size_t cap = t->cap_lingering ? t->cap_lingering * 2 : 8;
        pid_t *n = realloc(t->lingering, cap * sizeof(pid_t));
        if (!n)
            return;
        t->lingering = n;
        t->cap_lingering = cap;
    }
    t->lingering[t->n_lingering++] = pgid;
}

void process_table_remove(process_table *t, child *c)
{
    if (!c->tracked)
        return;
    list_unlink(t, c);
    c->tracked = false;
    if (!c->reaped)
        t->live--;
    else
        remember_group(t, c->pid);
}

child *process_table_find_id(process_table *t, int32_t id)
{
    if (id <= 0)
        return NULL;
    for (child *c = t->head; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

int child_signal(const child *c, int sig)
{
    if (kill(-c->pid, sig) == 0)
        return 0;
    if (kill(c->pid, sig) == 0)
        return 0;
    return -errno;
}

void process_table_signal_all(process_table *t, int sig)
{
    for (child *c = t->head; c; c = c->next)
        if (!c->reaped)
            (void)child_signal(c, sig);
    for (size_t i = 0; i < t->n_lingering; i++)
        (void)kill(-t->lingering[i], sig);
}

void process_table_close(process_table *t, uv_close_cb closed)
{
    process_table_signal_all(t, SIGKILL);
    free(t->lingering);
    t->lingering = NULL;
    t->n_lingering = t->cap_lingering = 0;
    while (t->head) {
        child *c = t->head;
        if (!c->reaped) {
            int status;
            while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
                ;
            c->reaped = true;
            t->live--;
        }
        list_unlink(t, c);
        c->tracked = false;
        c->ops->destroy(c);
    }
    if (!uv_is_closing((uv_handle_t *)&t->sigchld))
        uv_close((uv_handle_t *)&t->sigchld, closed);
}
