/* `asb port-forward sandbox/NAME [LOCAL:]REMOTE...`: listens on local ports and carries each
 * connection to REMOTE inside the sandbox (asb_port_connect: the router's CONNECT, made inside
 * the sandbox's network namespace, so `--network none` sandboxes work too). Output as kubectl's:
 * "Forwarding from 127.0.0.1:LOCAL -> REMOTE" per address, "Handling connection for LOCAL" per
 * connection. Runs until SIGINT/SIGTERM (exit 0). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/io-util.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"

#define MAX_LISTENERS 64

typedef struct pf_port {
    unsigned local, remote;
} pf_port;

typedef struct pf_listener {
    int fd;
    const pf_port *port;
} pf_listener;

typedef struct pf_conn {
    asb_client *cl;
    const char *sandbox;
    const pf_port *port;
    int fd, up;
    struct pf_conn *next;
} pf_conn;

static volatile sig_atomic_t stop;

/* Connections being carried, so that a stop can cut them and wait for their threads. */
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t conns_gone = PTHREAD_COND_INITIALIZER;
static pf_conn *conns;
static bool conns_cut;

static void conns_remove(pf_conn *c)
{
    pthread_mutex_lock(&conns_lock);
    for (pf_conn **p = &conns; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    if (!conns)
        pthread_cond_broadcast(&conns_gone);
    pthread_mutex_unlock(&conns_lock);
}

/* At a stop: every connection is shut down and its thread waited for (at most 5 s). */
static void conns_cut_all(void)
{
    pthread_mutex_lock(&conns_lock);
    conns_cut = true;
    for (pf_conn *c = conns; c; c = c->next) {
        shutdown(c->fd, SHUT_RDWR);
        if (c->up >= 0)
            shutdown(c->up, SHUT_RDWR);
    }
    struct timespec t = timespec_realtime_after(5 * USEC_PER_SEC);
    while (conns && pthread_cond_timedwait(&conns_gone, &conns_lock, &t) == 0)
        ;
    pthread_mutex_unlock(&conns_lock);
}

static void on_signal(int sig)
{
    stop = 1;
}

static void port_forward_usage(FILE *f)
{
    fprintf(f,
            "Usage: asb port-forward sandbox/NAME [LOCAL_PORT:]REMOTE_PORT [...]\n\n"
            "Forward local ports to ports inside a sandbox (NAME: a sandbox or a claim), through\n"
            "the router. \":REMOTE\" picks a free local port.\n\n"
            "Options:\n"
            "      --address ADDR  addresses to listen on, comma-separated or repeated: IPs or\n"
            "                      localhost (default localhost: 127.0.0.1 and ::1)\n"
            "  -h, --help          show this help\n" CLI_GLOBAL_HELP);
}

static bool parse_port_num(const char *s, size_t n, bool zero_ok, unsigned *ret)
{
    if (n == 0 || n > 5)
        return false;
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535 || (v == 0 && !zero_ok))
        return false;
    *ret = v;
    return true;
}

/* "[LOCAL:]REMOTE", ":REMOTE" (local 0: a free one). */
static bool parse_spec(const char *s, pf_port *ret)
{
    const char *colon = strchr(s, ':');
    if (!colon)
        return parse_port_num(s, strlen(s), false, &ret->remote) && (ret->local = ret->remote);
    ret->local = 0;
    return (colon == s || parse_port_num(s, (size_t)(colon - s), true, &ret->local)) &&
           parse_port_num(colon + 1, strlen(colon + 1), false, &ret->remote);
}

/* Copies both ways until both sides are done; a side's end is passed on as a half-close. */
static void relay(int a, int b)
{
    char data[65536];
    int fds[2] = {a, b};
    bool open_in[2] = {true, true};
    while (open_in[0] || open_in[1]) {
        struct pollfd p[2] = {{.fd = open_in[0] ? a : -1, .events = POLLIN},
                              {.fd = open_in[1] ? b : -1, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        for (int i = 0; i < 2; i++) {
            if (!open_in[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = recv(fds[i], data, sizeof(data), 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                open_in[i] = false;
                shutdown(fds[1 - i], SHUT_WR);
                if (n < 0)
                    return;
                continue;
            }
            if (loop_send(fds[1 - i], data, (size_t)n) < 0)
                return;
        }
    }
}

static void *conn_thread(void *arg)
{
    pf_conn *c = arg;
    int up = -1;
    if (asb_port_connect(&up, c->cl, cli_namespace(), c->sandbox, c->port->remote) != ASB_OK) {
        const asb_error *e = asb_error_last();
        fprintf(stderr, "error: an error occurred forwarding %u -> %u: %s\n", c->port->local,
                c->port->remote, e && e->message ? e->message : "cannot connect");
    } else {
        pthread_mutex_lock(&conns_lock);
        c->up = up;
        if (conns_cut)
            shutdown(up, SHUT_RDWR);
        pthread_mutex_unlock(&conns_lock);
        relay(c->fd, up);
    }
    conns_remove(c);
    if (up >= 0)
        close(up);
    close(c->fd);
    free(c);
    return NULL;
}

/* Listens on addr:port (port 0: a free one, then *port is what was bound). 0 or -errno. */
static int listen_on(const char *addr, unsigned *port, int *ret_fd, char out[64])
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *res = NULL;
    char ps[8];
    snprintf(ps, sizeof(ps), "%u", *port);
    if (getaddrinfo(addr, ps, &hints, &res) != 0)
        return -EADDRNOTAVAIL;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, r = 0;
    if (fd < 0)
        r = -errno;
    else {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (res->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 128) < 0)
            r = -errno;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (r == 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    snprintf(out, 64, res->ai_family == AF_INET6 ? "[%s]:%u" : "%s:%u", addr, *port);
    freeaddrinfo(res);
    if (r < 0) {
        if (fd >= 0)
            close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

/* The sandbox name of "sandbox/NAME" (any spelling of the kind asb accepts) or "NAME". */
static const char *target_name(const char *arg)
{
    const char *slash = strchr(arg, '/');
    if (!slash)
        return arg;
    static const char *const kinds[] = {"sandbox", "sandboxes", "sbx", "sandbox.agents.x-k8s.io",
                                        "sandboxes.agents.x-k8s.io"};
    for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
        if (strlen(kinds[i]) == (size_t)(slash - arg) &&
            strncasecmp(arg, kinds[i], (size_t)(slash - arg)) == 0)
            return slash + 1;
    return NULL;
}

static int serve(asb_client *cl, const char *sandbox, pf_listener *ls, size_t n)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct pollfd p[MAX_LISTENERS];
    for (size_t i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = ls[i].fd, .events = POLLIN};
    while (!stop) {
        if (poll(p, n, -1) < 0)
            continue; /* EINTR: a signal, stop is set */
        for (size_t i = 0; i < n; i++) {
            if (!(p[i].revents & POLLIN))
                continue;
            int fd = accept4(ls[i].fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            printf("Handling connection for %u\n", ls[i].port->local);
            fflush(stdout);
            pf_conn *c = malloc(sizeof(*c));
            pthread_t t;
            pthread_attr_t at;
            pthread_attr_init(&at);
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            if (c) {
                *c = (pf_conn){cl, sandbox, ls[i].port, fd, -1, NULL};
                pthread_mutex_lock(&conns_lock);
                c->next = conns;
                conns = c;
                pthread_mutex_unlock(&conns_lock);
            }
            if (c && pthread_create(&t, &at, conn_thread, c) != 0) {
                conns_remove(c);
                free(c);
                c = NULL;
            }
            if (!c)
                close(fd);
            pthread_attr_destroy(&at);
        }
    }
    conns_cut_all();
    return 0;
}

int asb_port_forward(int argc, char **argv)
{
    enum { OPT_ADDRESS = 1000 };
    static const struct option opts[] = {{"address", required_argument, NULL, OPT_ADDRESS},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    char *addrs[MAX_LISTENERS], *sn = NULL;
    size_t na = 0, nl = 0, np = 0;
    int ret = 2, c;
    pf_port *ports = NULL;
    pf_listener ls[MAX_LISTENERS];
    asb_client *cl = NULL;
    while ((c = getopt_long(argc, argv, "h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c != OPT_ADDRESS) {
            ret = cli_usage_option(c, argv, port_forward_usage);
            goto out;
        }
        _cleanup_free_ char *list = strdup(optarg);
        char *save = NULL;
        for (char *a = list ? strtok_r(list, ",", &save) : NULL; a;
             a = strtok_r(NULL, ",", &save)) {
            bool local = strcmp(a, "localhost") == 0;
            for (int k = 0; k < (local ? 2 : 1) && na < MAX_LISTENERS / 2; k++)
                addrs[na++] = strdup(local ? (k ? "::1" : "127.0.0.1") : a);
        }
    }
    if (na == 0) {
        addrs[na++] = strdup("127.0.0.1");
        addrs[na++] = strdup("::1");
    }
    if (argc - optind < 2) {
        fprintf(stderr, "error: TYPE/NAME and list of ports are required for port-forward\n"
                        "See 'asb port-forward -h' for help and examples\n");
        goto out;
    }
    const char *name = target_name(argv[optind]);
    if (!name || !*name) {
        fprintf(stderr,
                "error: asb port-forward forwards to sandboxes: sandbox/NAME or NAME, not "
                "\"%s\"\n",
                argv[optind]);
        goto out;
    }
    np = (size_t)(argc - optind - 1);
    if (!(ports = calloc(np, sizeof(*ports))))
        goto out;
    for (size_t i = 0; i < np; i++)
        if (!parse_spec(argv[optind + 1 + i], &ports[i])) {
            fprintf(stderr, "error: Error parsing local port '%s': want [LOCAL_PORT:]REMOTE_PORT\n",
                    argv[optind + 1 + i]);
            goto out;
        }
    if ((ret = cli_client(&cl)) != 0 || (ret = cli_sandbox_resolve(cl, name, &sn, NULL)) != 0)
        goto out;
    ret = 1;
    for (size_t i = 0; i < np; i++) {
        bool any = false;
        for (size_t k = 0; k < na && nl < MAX_LISTENERS; k++) {
            char shown[64];
            int fd = -1, r = listen_on(addrs[k], &ports[i].local, &fd, shown);
            if (r < 0) {
                fprintf(stderr, "Unable to listen on %s: %s\n", shown, strerror(-r));
                continue;
            }
            ls[nl++] = (pf_listener){fd, &ports[i]};
            printf("Forwarding from %s -> %u\n", shown, ports[i].remote);
            any = true;
        }
        if (!any) {
            fprintf(stderr, "error: unable to listen on any of the requested ports: [{%u %u}]\n",
                    ports[i].local, ports[i].remote);
            goto out;
        }
    }
    fflush(stdout);
    ret = serve(cl, sn, ls, nl);
out:
    for (size_t i = 0; i < nl; i++)
        close(ls[i].fd);
    free(ports);
    free(sn);
    asb_client_free(cl);
    for (size_t i = 0; i < na; i++)
        free(addrs[i]);
    return ret;
}
