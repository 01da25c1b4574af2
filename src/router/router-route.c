/* Routing decisions on client input: header validation with upstream's messages (§3.1), the
 * dispatch rule (DESIGN "Router dispatch"), bearer-token auth and header filtering. Pure
 * functions, fuzzed by fuzz/fuzz-router-input.c. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "router/router-internal.h"

bool router_valid_dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && i > 0 && i < n - 1))
            return false;
    }
    return true;
}

bool router_is_grpc_content_type(const char *ct)
{
    if (!ct)
        return false;
    static const char g[] = "application/grpc";
    if (strncasecmp(ct, g, sizeof(g) - 1) != 0)
        return false;
    char c = ct[sizeof(g) - 1];
    return c == '\0' || c == '+' || c == ';';
}

/* Strict decimal 1..65535 (no sign, no spaces), as upstream's int parse + range check. Returns
 * the port or -EINVAL. */
static int parse_port(const char *s)
{
    if (!*s || strlen(s) > 5)
        return -EINVAL;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        v = v * 10 + (*p - '0');
    }
    return v >= 1 && v <= 65535 ? (int)v : -EINVAL;
}

/* Pod IP: a literal, not loopback / link-local / multicast / unspecified. */
static bool valid_pod_ip(const char *s)
{
    unsigned char b[16];
    if (inet_pton(AF_INET, s, b) == 1) {
        if (b[0] == 127 || b[0] == 0 || (b[0] == 169 && b[1] == 254) || b[0] >= 224)
            return false;
        return true;
    }
    if (inet_pton(AF_INET6, s, b) == 1) {
        static const unsigned char zero[16];
        if (memcmp(b, zero, 16) == 0)
            return false; /* :: */
        if (memcmp(b, zero, 15) == 0 && b[15] == 1)
            return false; /* ::1 */
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
            return false; /* fe80::/10 */
        if (b[0] == 0xff)
            return false; /* multicast */
        return true;
    }
    return false;
}

static bool is_legacy_path(const char *path)
{
    return !(strncmp(path, "/v1/", 4) == 0 || strcmp(path, "/v1") == 0 ||
             strncmp(path, "/v1?", 4) == 0);
}

static void copy_label(char dst[64], const char *s, size_t n)
{
    n = n < 63 ? n : 63;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

bool router_preview_host(const char *host, const char *domain, router_route *out)
{
    if (!host || !domain || !*domain)
        return false;
    /* PORT-ID . NS . DOMAIN [:P] */
    const char *dot1 = strchr(host, '.');
    const char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
    if (!dot1 || !dot2)
        return false;
    size_t dl = strlen(domain);
    const char *rest = dot2 + 1;
    if (strncasecmp(rest, domain, dl) != 0 || (rest[dl] != '\0' && rest[dl] != ':'))
        return false;
    if (rest[dl] == ':' && parse_port(rest + dl + 1) < 0)
        return false;
    const char *dash = memchr(host, '-', (size_t)(dot1 - host));
    if (!dash || dash == host || dash - host > 5)
        return false;
    char label[64], pnum[6];
    memcpy(pnum, host, (size_t)(dash - host));
    pnum[dash - host] = '\0';
    int port = parse_port(pnum);
    if (port < 0)
        return false;
    memset(out, 0, sizeof(*out));
    size_t n = (size_t)(dot1 - dash - 1);
    if (n == 0 || n > 63)
        return false;
    copy_label(label, dash + 1, n);
    for (char *p = label; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    if (!router_valid_dns_label(label))
        return false;
    memcpy(out->id, label, sizeof(label));
    n = (size_t)(dot2 - dot1 - 1);
    if (n == 0 || n > 63)
        return false;
    copy_label(label, dot1 + 1, n);
    for (char *p = label; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    if (!router_valid_dns_label(label))
        return false;
    memcpy(out->ns, label, sizeof(label));
    out->kind = ROUTER_KIND_PORT;
    out->port = (unsigned)port;
    out->preview = true;
    return true;
}

bool router_port_is_sandboxd(const char *port)
{
    int p = port && *port ? parse_port(port) : -1;
    return p < 0 || p == 8080 || p == 9090 || p == 8888;
}

int router_route_request(const router_request_info *in, router_route *out, api_error *err)
{
    if (router_preview_host(in->host, in->preview_domain, out))
        return 0;
    memset(out, 0, sizeof(*out));
    if (!in->sandbox_id || !*in->sandbox_id) {
        return api_error_set(err, STATUS_INVALID_ARGUMENT, "X-Sandbox-ID header is required.");
    }
    if (!router_valid_dns_label(in->sandbox_id)) {
        return api_error_set(err, STATUS_INVALID_ARGUMENT, "Invalid sandbox ID format.");
    }
    const char *ns = in->sandbox_ns && *in->sandbox_ns ? in->sandbox_ns : "default";
    if (!router_valid_dns_label(ns)) {
        return api_error_set(err, STATUS_INVALID_ARGUMENT, "Invalid namespace format.");
    }
    int port = -1;
    if (in->sandbox_port && *in->sandbox_port) {
        port = parse_port(in->sandbox_port);
        if (port < 0) {
            return api_error_set(err, STATUS_INVALID_ARGUMENT, "Invalid port format.");
        }
    }
    if (in->pod_ip && *in->pod_ip && !valid_pod_ip(in->pod_ip)) {
        return api_error_set(err, STATUS_INVALID_ARGUMENT, "Invalid target IP address.");
    }
    copy_label(out->id, in->sandbox_id, strlen(in->sandbox_id));
    copy_label(out->ns, ns, strlen(ns));
    if (port >= 0) {
        switch (port) {
        case 8888:
            out->kind = ROUTER_KIND_LEGACY;
            return 0;
        case 8080:
            out->kind = ROUTER_KIND_REST;
            return 0;
        case 9090:
            out->kind = ROUTER_KIND_GRPC;
            return 0;
        default:
            out->kind = ROUTER_KIND_PORT;
            out->port = (unsigned)port;
            return 0;
        }
    }
    if (router_is_grpc_content_type(in->content_type))
        out->kind = ROUTER_KIND_GRPC;
    else if (in->path && !is_legacy_path(in->path))
        out->kind = ROUTER_KIND_REST;
    else
        out->kind = ROUTER_KIND_LEGACY;
    return 0;
}

/* Constant-time comparison of two strings (length leaks, content does not). */
static bool secure_equal(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < na; i++)
        d |= (unsigned char)a[i] ^ (unsigned char)b[i % (nb ? nb : 1)];
    return d == 0;
}

int router_check_auth(const char *authorization, const char *token, bool allow_unauthenticated,
                      bool peer_loopback, api_error *err)
{
    if (!token)
        return 0;
    if (!authorization || !*authorization) {
        if (allow_unauthenticated && peer_loopback)
            return 0;
        return router_error_unauthorized(err);
    }
    const char *p = authorization;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncasecmp(p, "bearer", 6) != 0 || (p[6] != ' ' && p[6] != '\t')) {
        return router_error_unauthorized(err);
    }
    p += 6;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0) {
        return router_error_unauthorized(err);
    }
    char *given = strndup(p, n);
    if (!given) {
        return router_error_internal(err, -ENOMEM);
    }
    bool ok = secure_equal(given, token);
    free(given);
    if (!ok) {
        api_error_set(err, STATUS_UNAUTHENTICATED, "Invalid token.");
        return -EACCES;
    }
    return 0;
}

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

bool router_response_header_dropped(const char *name, size_t len)
{
    static const char *const hop[] = {"connection",        "keep-alive",        "proxy-connection",
                                      "transfer-encoding", "upgrade",           "te",
                                      "trailer",           "proxy-authenticate"};
    if (len > 0 && name[0] == ':')
        return true;
    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (name_is(name, len, hop[i]))
            return true;
    return false;
}

bool router_header_dropped(const char *name, size_t len)
{
    if (router_response_header_dropped(name, len))
        return true;
    if (name_is(name, len, "host") || name_is(name, len, "authorization") ||
        name_is(name, len, "expect") || name_is(name, len, "content-length") ||
        name_is(name, len, "proxy-authorization"))
        return true;
    return len >= 10 && strncasecmp(name, "x-sandbox-", 10) == 0;
}
