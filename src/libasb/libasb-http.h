/* One HTTP exchange of the control-plane client (object verbs, watches), over one of two
 * transports:
 *  - plain: HTTP/1.1 on a fresh TCP connection, replies parsed by http_parser. Used for http://
 *    URLs whose host is loopback (127.0.0.0/8, ::1, localhost): the `asb serve` case, which no
 *    proxy ever handles (the client puts loopback into NO_PROXY), so nothing curl would do
 *    differently applies. Keeps libcurl out of the process.
 *  - curl: everything else (https://, remote hosts, proxies), libcurl loaded on first use
 *    (libasb-curl.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "asb/asb.h"

/* Returned by asbi_http_perform() when on_body asked to stop (no error set by the transport). */
#define ASBI_HTTP_STOPPED 1

typedef struct asbi_http_exchange {
    const char *method;         /* "GET", "POST", ... */
    const char *url;            /* absolute http:// or https:// URL */
    const char *const *headers; /* "Name: value" lines (no CRLF), n_headers of them */
    size_t n_headers;
    const char *body; /* NULL: none */
    size_t body_len;
    long timeout_ms; /* the whole exchange; 0: none */
    long connect_timeout_ms;
    const volatile int *cancel; /* non-zero: stop with ASB_ECANCELLED; may be NULL */
    /* Each reply header, name and value without surrounding blanks (not NUL-terminated). */
    void (*on_header)(const char *name, size_t name_len, const char *value, size_t value_len,
                      void *payload);
    /* Body bytes as they arrive, with the reply's status; returns false to stop the exchange. */
    bool (*on_body)(const char *data, size_t len, long status, void *payload);
    void *payload;
} asbi_http_exchange;

/* Performs x with c's transport settings (proxy exceptions, user agent). *ret_status gets the
 * reply status (0 when none arrived). Returns ASB_OK, ASBI_HTTP_STOPPED, or an error (set):
 * ASB_ECONNECT, ASB_ETIMEOUT, ASB_ECANCELLED, ASB_ENOMEM, ASB_EINVAL (bad URL), ASB_EPROTOCOL. */
int asbi_http_perform(asb_client *c, const asbi_http_exchange *x, long *ret_status);

/* Whether url goes over the plain transport (see above). */
bool asbi_http_plain_applies(const char *url);
/* The two transports (asbi_http_perform picks one). server names the server in messages. */
int asbi_http_plain(const asbi_http_exchange *x, const char *server, long *ret_status);
int asbi_http_curl(asb_client *c, const asbi_http_exchange *x, long *ret_status);

/* s percent-encoded for a path segment or a query value (RFC 3986: all but unreserved
 * characters). Owned by the caller; NULL on ENOMEM (error set). */
char *asbi_url_escape(const char *s);
/* Appends "?key=value" (or "&key=value" once *url has a query) to *url, value escaped; *url is
 * replaced (owned by the caller). ASB_OK or ASB_ENOMEM (set; *url left as it was). */
int asbi_url_add_query(char **url, const char *key, const char *value);
