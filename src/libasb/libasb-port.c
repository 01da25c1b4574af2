/* asb_port_connect(): a byte stream to a port inside a sandbox, through the router's CONNECT
 * (docs/router.md, "Sandbox ports"); what `asb port-forward` carries each connection over. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asb/sandbox.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"

#define HEAD_MAX 16384

/* Reads the router's answer head without taking a byte past it (the server's first bytes follow
 * at once for protocols where it speaks first): peek, then consume exactly the head. */
static int read_head(int fd, char *head, size_t *ret_len, long timeout_ms)
{
    size_t have = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)timeout_ms);
        if (pr <= 0)
            return pr == 0 ? -ETIMEDOUT : -errno;
        ssize_t n = recv(fd, head, HEAD_MAX - 1, MSG_PEEK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0 || (size_t)n == have)
            return n == 0 ? -ECONNRESET : -EPROTO; /* closed, or no progress (head too long) */
        have = (size_t)n;
        head[have] = '\0';
        char *end = strstr(head, "\r\n\r\n");
        if (end) {
            size_t len = (size_t)(end - head) + 4;
            if (recv(fd, head, len, 0) != (ssize_t)len)
                return -EIO;
            head[len] = '\0';
            *ret_len = len;
            return 0;
        }
    }
}

/* The body of a refusal (its {"detail"}), read after the head; "" when none. Owned. */
static char *refusal_detail(int fd, const char *head)
{
    const char *cl = strcasestr(head, "\r\ncontent-length:");
    long n = cl ? strtol(cl + 17, NULL, 10) : 0;
    if (n <= 0 || n > 4096)
        return strdup("");
    char *body = calloc(1, (size_t)n + 1);
    size_t got = 0;
    while (body && got < (size_t)n) {
        ssize_t k = recv(fd, body + got, (size_t)n - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    const char *d = json_string_value(json_object_get(j, "detail"));
    char *out = strdup(d ? d : (body ? body : ""));
    json_decref(j);
    free(body);
    return out;
}

ASB_PUBLIC int asb_port_connect(int *out, asb_client *client, const char *ns, const char *name,
                                unsigned port)
{
    if (!out || !client || !name || port < 1 || port > 65535)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_port_connect: bad argument");
    *out = -1;
    char *router = NULL, *host = NULL, *rport = NULL, *req = NULL;
    int r = asb_client_router(&router, client);
    if (r == ASB_OK)
        r = asbi_router_url_split(router, &host, &rport);
    int fd = r == ASB_OK ? asbi_router_connect(host, rport) : -1;
    if (r == ASB_OK && fd < 0)
        r = fd;
    if (r != ASB_OK)
        goto out;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    const char *token = client->token;
    int n =
        asprintf(&req,
                 "CONNECT 127.0.0.1:%u HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nX-Sandbox-ID: %s\r\n"
                 "X-Sandbox-Namespace: %s\r\nX-Sandbox-Port: %u\r\n%s%s%s\r\n",
                 port, port, name, ns ? ns : "default", port, token ? "Authorization: Bearer " : "",
                 token ? token : "", token ? "\r\n" : "");
    if (n < 0) {
        req = NULL;
        r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        goto out;
    }
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        r = asbi_error_set(ASB_ECONNECT, 0, NULL, "the connection to the router at %s failed: %s",
                           router, strerror(errno));
        goto out;
    }
    char head[HEAD_MAX];
    size_t hl = 0;
    int k = read_head(fd, head, &hl, 30000);
    if (k < 0) {
        r = asbi_error_set(k == -ETIMEDOUT ? ASB_ETIMEOUT : ASB_EPROTOCOL, 0, NULL,
                           "the router at %s gave no answer to CONNECT: %s", router, strerror(-k));
        goto out;
    }
    int status = 0;
    if (sscanf(head, "HTTP/1.%*d %d", &status) != 1) {
        r = asbi_error_set(ASB_EPROTOCOL, 0, NULL,
                           "the router at %s answered CONNECT with no status", router);
        goto out;
    }
    if (status != 200) {
        char *detail = refusal_detail(fd, head);
        r = asbi_error_set(asbi_error_from_status(status, NULL), status, NULL, "%s",
                           detail && *detail ? detail : "the router refused the connection");
        free(detail);
        goto out;
    }
    *out = fd;
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    free(req);
    free(host);
    free(rport);
    free(router);
    return r;
}
