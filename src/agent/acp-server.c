/* acp-server's listener: binds HOST:PORT and runs one reader thread per connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/acp-server.h"
#include "basic/macro.h"
#include "shared/log.h"

static int fail(api_error *err, int r, const char *fmt, const char *arg)
{
    return api_error_set_errno(err, r, fmt, arg, strerror(-r));
}

/* Splits "HOST:PORT" or "[V6]:PORT". */
static int split_hostport(const char *addr, char **ret_host, char **ret_port)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon[1] == 0)
        return -EINVAL;
    const char *h = addr;
    size_t hl = (size_t)(colon - addr);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    *ret_host = strndup(h, hl);
    *ret_port = strdup(colon + 1);
    if (!*ret_host || !*ret_port) {
        free(*ret_host);
        free(*ret_port);
        return -ENOMEM;
    }
    return 0;
}

static bool sockaddr_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

static int bind_listener(acp_server *s, const char *listen_addr, api_error *err)
{
    _cleanup_free_ char *host = NULL, *port = NULL;
    if (split_hostport(listen_addr, &host, &port) < 0)
        return fail(err, -EINVAL, "bad --listen address %s (want HOST:PORT): %s", listen_addr);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host[0] ? host : NULL, port, &hints, &ai) != 0 || !ai)
        return fail(err, -EINVAL, "cannot resolve %s: %s", listen_addr);
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int r = -errno;
        freeaddrinfo(ai);
        return fail(err, r, "socket for %s: %s", listen_addr);
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        int r = -errno;
        freeaddrinfo(ai);
        close(fd);
        return fail(err, r, "cannot listen on %s: %s", listen_addr);
    }
    s->loopback = sockaddr_loopback(ai->ai_addr);
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char h[INET6_ADDRSTRLEN] = "?";
    int p = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, h, sizeof(h));
            p = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, h, sizeof(h));
            p = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    if (asprintf(&s->address, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", h, p) < 0) {
        s->address = NULL;
        close(fd);
        return -ENOMEM;
    }
    s->listen_fd = fd;
    return 0;
}

int acp_server_new(acp_server **ret, const acp_server_config *cfg, api_error *err)
{
    acp_server *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    s->listen_fd = -1;
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    int r = bind_listener(s, cfg->listen ? cfg->listen : ACP_DEFAULT_LISTEN, err);
    if (r < 0) {
        acp_server_free(s);
        return r;
    }
    if (cfg->allow_unauthenticated && !s->loopback) {
        acp_server_free(s);
        return fail(err, -EPERM,
                    "--allow-unauthenticated is only allowed on a loopback address, not %s%s",
                    cfg->listen ? cfg->listen : ACP_DEFAULT_LISTEN);
    }
    if (!cfg->token && !cfg->allow_unauthenticated) {
        acp_server_free(s);
        return api_error_set_errno(err, -ENOKEY,
                                   "no token to authenticate clients with: give --token-file, set "
                                   "ASB_STATE_DIR, or use --allow-unauthenticated on loopback");
    }
    if (pipe2(s->stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        r = -errno;
        acp_server_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

const char *acp_server_address(const acp_server *s)
{
    return s->address;
}

void acp_server_stop(acp_server *s)
{
    char b = 1;
    ssize_t n = write(s->stop_pipe[1], &b, 1);
    (void)n;
}

static bool conn_slot_take(acp_server *s)
{
    pthread_mutex_lock(&s->lock);
    bool ok = s->n_conns < ACP_MAX_CONNECTIONS;
    if (ok)
        s->n_conns++;
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static void conn_slot_put(acp_server *s)
{
    pthread_mutex_lock(&s->lock);
    s->n_conns--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* Ends every connection: their readers see EOF, cancel their turns and exit. */
static void close_all_and_wait(acp_server *s)
{
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    for (acp_conn *c = s->conns; c; c = c->next_conn)
        shutdown(c->fd, SHUT_RDWR);
    while (s->n_conns > 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void *conn_thread(void *arg)
{
    acp_server *s = ((void **)arg)[0];
    acp_conn_serve(s, (int)(intptr_t)((void **)arg)[1]);
    free(arg);
    conn_slot_put(s);
    return NULL;
}

int acp_server_run(acp_server *s)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN},
                              {.fd = s->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (!conn_slot_take(s)) {
            log_warn("acp: too many connections, closing a new one");
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        void **arg = malloc(2 * sizeof(void *));
        pthread_t t;
        if (!arg) {
            conn_slot_put(s);
            close(fd);
            continue;
        }
        arg[0] = s;
        arg[1] = (void *)(intptr_t)fd;
        if (pthread_create(&t, &attr, conn_thread, arg) != 0) {
            conn_slot_put(s);
            free(arg);
            close(fd);
        }
    }
    pthread_attr_destroy(&attr);
    close_all_and_wait(s);
    return 0;
}

acp_server *acp_server_free(acp_server *s)
{
    if (!s)
        return NULL;
    safe_close(s->listen_fd);
    safe_close(s->stop_pipe[0]);
    safe_close(s->stop_pipe[1]);
    for (size_t i = 0; i < s->n_open; i++)
        free(s->open_names[i]);
    free(s->open_names);
    free(s->address);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return NULL;
}
