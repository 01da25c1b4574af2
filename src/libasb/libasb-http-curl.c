/* The curl transport of libasb-http.h (https://, remote servers, proxies): libcurl, loaded on
 * first use, with one easy handle per client kept for connection reuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libasb/libasb-curl.h"
#include "libasb/libasb-http.h"
#include "libasb/libasb-internal.h"

typedef struct transfer {
    const asbi_http_exchange *x;
    CURL *curl;
    long status;
    int stopped;
} transfer;

static size_t write_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
    transfer *t = userdata;
    size_t len = size * nmemb;
    if (t->status == 0)
        curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->status);
    if (!t->x->on_body(data, len, t->status, t->x->payload)) {
        t->stopped = 1;
        return 0;
    }
    return len;
}

/* "Name: value\r\n" lines of every reply (the status line and the blank line too). */
static size_t header_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
    transfer *t = userdata;
    size_t len = size * nmemb;
    const char *colon = memchr(data, ':', len);
    if (!colon || !t->x->on_header)
        return len;
    const char *v = colon + 1;
    size_t vn = len - (size_t)(v - data);
    while (vn > 0 && (*v == ' ' || *v == '\t'))
        v++, vn--;
    while (vn > 0 && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' '))
        vn--;
    t->x->on_header(data, (size_t)(colon - data), v, vn, t->x->payload);
    return len;
}

static int progress_cb(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    transfer *t = userdata;
    return t->x->cancel && *t->x->cancel ? 1 : 0;
}

static int error_from_curl(asb_client *c, CURLcode rc)
{
    const char *detail = c->curl_detail[0] ? c->curl_detail : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return asbi_error_set(ASB_ETIMEOUT, 0, NULL, "request to %s timed out: %s", c->server,
                              detail);
    case CURLE_ABORTED_BY_CALLBACK:
        return asbi_error_set(ASB_ECANCELLED, 0, NULL, "cancelled");
    case CURLE_OUT_OF_MEMORY:
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return asbi_error_set(ASB_EINVAL, 0, NULL, "bad server URL %s: %s", c->server, detail);
    default:
        return asbi_error_set(ASB_ECONNECT, 0, NULL, "the connection to the server %s failed: %s",
                              c->server, detail);
    }
}

static int headers_list(const asbi_http_exchange *x, struct curl_slist **ret)
{
    struct curl_slist *h = NULL, *t;
    for (size_t i = 0; i < x->n_headers; i++) {
        if (!(t = curl_slist_append(h, x->headers[i]))) {
            curl_slist_free_all(h);
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        }
        h = t;
    }
    *ret = h;
    return ASB_OK;
}

int asbi_http_curl(asb_client *c, const asbi_http_exchange *x, long *ret_status)
{
    *ret_status = 0;
    int r = asbi_curl_load();
    if (r != ASB_OK)
        return r;
    if (!c->curl && !(c->curl = curl_easy_init()))
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "curl_easy_init failed");
    struct curl_slist *h = NULL;
    r = headers_list(x, &h);
    if (r != ASB_OK)
        return r;
    CURL *cu = c->curl;
    transfer t = {.x = x, .curl = cu};
    curl_easy_reset(cu);
    c->curl_detail[0] = '\0';
    curl_easy_setopt(cu, CURLOPT_URL, x->url);
    curl_easy_setopt(cu, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(cu, CURLOPT_ERRORBUFFER, c->curl_detail);
    curl_easy_setopt(cu, CURLOPT_CONNECTTIMEOUT_MS, x->connect_timeout_ms);
    curl_easy_setopt(cu, CURLOPT_TIMEOUT_MS, x->timeout_ms > 0 ? x->timeout_ms : 0L);
    curl_easy_setopt(cu, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(cu, CURLOPT_USERAGENT, "libasb/" ASB_VERSION);
    if (c->noproxy)
        curl_easy_setopt(cu, CURLOPT_NOPROXY, c->noproxy);
    if (strcmp(x->method, "GET") == 0)
        curl_easy_setopt(cu, CURLOPT_HTTPGET, 1L);
    else
        curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, x->method);
    if (x->body) {
        curl_easy_setopt(cu, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(cu, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
    }
    curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(cu, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(cu, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(cu, CURLOPT_HEADERDATA, &t);
    if (x->cancel) {
        curl_easy_setopt(cu, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(cu, CURLOPT_XFERINFOFUNCTION, progress_cb);
        curl_easy_setopt(cu, CURLOPT_XFERINFODATA, &t);
    }
    CURLcode rc = curl_easy_perform(cu);
    curl_slist_free_all(h);
    curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, ret_status);
    if (t.stopped)
        return ASBI_HTTP_STOPPED;
    return rc == CURLE_OK ? ASB_OK : error_from_curl(c, rc);
}
