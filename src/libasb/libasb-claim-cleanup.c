/* Auto-cleanup of owned claims. A registry (mutex-protected) remembers every claim created with
 * auto_cleanup and where it lives (server, token). The SIGINT/SIGTERM handler only write(2)s the
 * signal number to a pipe -- the one async-signal-safe thing it does; a cleanup thread waiting on
 * that pipe deletes the claims with fresh clients, restores the previous disposition and
 * re-raises the signal, as upstream's EnableAutoCleanup does. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asb/claim.h"
#include "basic/time-util.h"
#include "libasb/libasb-claim-internal.h"
#include "libasb/libasb-internal.h"

#define CLEANUP_TIMEOUT_MS 5000

typedef struct entry {
    char *server, *token, *ns, *name;
} entry;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_settled = PTHREAD_COND_INITIALIZER;
static entry *reg;
static size_t reg_n;
static size_t creates_in_flight; /* under reg_lock */

static void entry_done(entry *e)
{
    free(e->server);
    free(e->token);
    free(e->ns);
    free(e->name);
}

int asbi_claims_register(asb_client *client, const char *ns, const char *name)
{
    entry e = {strdup(client->server), client->token ? strdup(client->token) : NULL, strdup(ns),
               strdup(name)};
    if (!e.server || (client->token && !e.token) || !e.ns || !e.name) {
        entry_done(&e);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    pthread_mutex_lock(&reg_lock);
    entry *n = realloc(reg, (reg_n + 1) * sizeof(*n));
    if (n) {
        reg = n;
        reg[reg_n++] = e;
    }
    pthread_mutex_unlock(&reg_lock);
    if (!n) {
        entry_done(&e);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    return ASB_OK;
}

void asbi_claims_unregister(const char *ns, const char *name)
{
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < reg_n; i++)
        if (strcmp(reg[i].ns, ns) == 0 && strcmp(reg[i].name, name) == 0) {
            entry_done(&reg[i]);
            reg[i] = reg[--reg_n];
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

void asbi_claims_create_begin(void)
{
    pthread_mutex_lock(&reg_lock);
    creates_in_flight++;
    pthread_mutex_unlock(&reg_lock);
}

void asbi_claims_create_end(void)
{
    pthread_mutex_lock(&reg_lock);
    if (creates_in_flight > 0)
        creates_in_flight--;
    pthread_cond_broadcast(&reg_settled);
    pthread_mutex_unlock(&reg_lock);
}

size_t asbi_claims_registered(void)
{
    pthread_mutex_lock(&reg_lock);
    size_t n = reg_n;
    pthread_mutex_unlock(&reg_lock);
    return n;
}

ASB_PUBLIC int asb_claims_cleanup_run(void)
{
    /* Creates in flight register their claim first (at most CLEANUP_TIMEOUT_MS). Then take the
     * whole registry: whatever happens, these claims are no longer ours to track. */
    struct timespec until = timespec_realtime_after(CLEANUP_TIMEOUT_MS * USEC_PER_MSEC);
    pthread_mutex_lock(&reg_lock);
    while (creates_in_flight > 0 &&
           pthread_cond_timedwait(&reg_settled, &reg_lock, &until) != ETIMEDOUT)
        ;
    entry *list = reg;
    size_t n = reg_n;
    reg = NULL;
    reg_n = 0;
    pthread_mutex_unlock(&reg_lock);
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
        o.server = list[i].server;
        o.token = list[i].token ? list[i].token : "";
        o.timeout_ms = CLEANUP_TIMEOUT_MS;
        o.connect_timeout_ms = CLEANUP_TIMEOUT_MS;
        asb_client *c = NULL;
        int r = asb_client_new(&c, &o);
        if (r == ASB_OK)
            r = asb_object_delete(NULL, c, "SandboxClaim", list[i].ns, list[i].name);
        if (r != ASB_OK && r != ASB_ENOTFOUND)
            failed++;
        asb_client_free(c);
        entry_done(&list[i]);
    }
    free(list);
    return failed;
}

static pthread_mutex_t inst_lock = PTHREAD_MUTEX_INITIALIZER;
static int pipe_fds[2] = {-1, -1};
static int installed;
static pthread_t cleanup_thread;
static struct sigaction old_int, old_term;

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t n = write(pipe_fds[1], &b, 1);
    (void)n;
    errno = saved;
}

static void *cleanup_main(void *arg)
{
    (void)arg;
    unsigned char b;
    for (;;) {
        ssize_t n = read(pipe_fds[0], &b, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || b == 0)
            return NULL; /* uninstall */
        break;
    }
    int sig = b;
    asb_claims_cleanup_run();
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    kill(getpid(), sig);
    return NULL;
}

ASB_PUBLIC int asb_claims_cleanup_install(void)
{
    pthread_mutex_lock(&inst_lock);
    int r = ASB_OK;
    if (installed)
        goto out;
    if (pipe2(pipe_fds, O_CLOEXEC) < 0) {
        r = asbi_error_set(ASB_ERROR, 0, NULL, "pipe: %s", strerror(errno));
        goto out;
    }
    /* The thread must not take the signals itself only to block in write(): block them there. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int e = pthread_create(&cleanup_thread, NULL, cleanup_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        pipe_fds[0] = pipe_fds[1] = -1;
        r = asbi_error_set(ASB_ERROR, 0, NULL, "pthread_create: %s", strerror(e));
        goto out;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    installed = 1;
out:
    pthread_mutex_unlock(&inst_lock);
    return r;
}

ASB_PUBLIC void asb_claims_cleanup_uninstall(void)
{
    pthread_mutex_lock(&inst_lock);
    if (installed) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        unsigned char zero = 0;
        ssize_t n = write(pipe_fds[1], &zero, 1);
        (void)n;
        pthread_join(cleanup_thread, NULL);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        pipe_fds[0] = pipe_fds[1] = -1;
        installed = 0;
    }
    pthread_mutex_unlock(&inst_lock);
}
