/* The controller's small HTTP endpoints on libmicrohttpd: /healthz and /readyz on the health
 * probe address, /metrics on the metrics address. */
#include "kube/kube-http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "basic/macro.h"

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *ctype,
                             char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", ctype);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_size, void **con_cls)
{
    kube_ctl *ctl = cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(conn, 405, "text/plain", strdup("method not allowed\n"));
    if (strcmp(url, "/healthz") == 0 || strcmp(url, "/livez") == 0)
        return reply(conn, 200, "text/plain", strdup("ok"));
    if (strcmp(url, "/readyz") == 0) {
        /* Ready once the caches synced; a standby (not leading) is ready too, as
         * controller-runtime's ping check: readiness gates traffic, not leadership. */
        bool ok = !atomic_load(&ctl->stop) && (!atomic_load(&ctl->leading) || kube_ctl_synced(ctl));
        return reply(conn, ok ? 200 : 503, "text/plain", strdup(ok ? "ok" : "caches not synced"));
    }
    if (strcmp(url, "/metrics") == 0) {
        char *m = kube_metrics_render(ctl);
        return reply(conn, m ? 200 : 500, "text/plain; version=0.0.4", m ? m : strdup(""));
    }
    return reply(conn, 404, "text/plain", strdup("404 page not found\n"));
}

/* "host:port", ":port", "[v6]:port"; "0" disables. */
static int listen_on(const char *addr, int *ret_fd, char **ret_bound)
{
    _cleanup_free_ char *host = NULL;
    const char *colon = strrchr(addr, ':');
    if (!colon)
        return -EINVAL;
    host = strndup(addr, (size_t)(colon - addr));
    if (!host)
        return -ENOMEM;
    if (host[0] == '[') {
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(*host ? host : NULL, colon + 1, &hints, &ai) != 0 || !ai)
        return -EINVAL;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        int e = -errno;
        freeaddrinfo(ai);
        safe_close(fd);
        return e;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    char h[INET6_ADDRSTRLEN] = "", p[16] = "";
    getnameinfo((struct sockaddr *)&ss, sl, h, sizeof h, p, sizeof p,
                NI_NUMERICHOST | NI_NUMERICSERV);
    if (asprintf(ret_bound, "%s%s%s:%s", ss.ss_family == AF_INET6 ? "[" : "", h,
                 ss.ss_family == AF_INET6 ? "]" : "", p) < 0)
        *ret_bound = NULL;
    *ret_fd = fd;
    return 0;
}

int kube_http_start(kube_ctl *ctl, const char *addr, void **ret_daemon, char **ret_bound)
{
    *ret_daemon = NULL;
    if (!addr || !*addr || strcmp(addr, "0") == 0)
        return 0;
    int fd = -1;
    int e = listen_on(addr, &fd, ret_bound);
    if (e < 0)
        return e;
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, ctl,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
    if (!d) {
        close(fd);
        return -EIO;
    }
    *ret_daemon = d;
    return 0;
}

void kube_http_stop(void *daemon)
{
    if (daemon)
        MHD_stop_daemon(daemon);
}
