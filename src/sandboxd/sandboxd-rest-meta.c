/* /v1/health (readiness) and /v1/metadata (filtered environment, computed once). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-rest-internal.h"

extern char **environ;

enum MHD_Result rest_handle_health(rest_request *req, struct MHD_Connection *c)
{
    sandboxd *sd = req->srv->sd;
    if (!atomic_load(&sd->ready))
        return rest_queue_error(req, c, STATUS_UNAVAILABLE, "sandboxd is shutting down");
    usec_t up = (now_usec(CLOCK_MONOTONIC) - sd->started_at) / USEC_PER_SEC;
    json_buf b = {0};
    char num[32];
    snprintf(num, sizeof(num), "%llu", (unsigned long long)up);
    json_buf_lit(&b, "{\"status\":\"ok\",\"uptime_seconds\":");
    json_buf_lit(&b, num);
    json_buf_lit(&b, "}\n");
    return rest_queue_json(req, c, MHD_HTTP_OK, &b);
}

static const char *const credential_markers[] = {
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CRED", "KEY", "AUTH", "BEARER", "PRIVATE", "CERT",
};

/* Whether an environment variable name may be exposed: prefix match (case-sensitive) and no
 * credential marker in the upper-cased name. */
static bool env_name_allowed(const char *name, size_t len, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (len < pl || memcmp(name, prefix, pl) != 0)
        return false;
    _cleanup_free_ char *up = strndup(name, len);
    if (!up)
        return false;
    for (char *p = up; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    for (size_t i = 0; i < ELEMENTSOF(credential_markers); i++)
        if (strstr(up, credential_markers[i]))
            return false;
    return true;
}

static int cmp_env(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t xl = strcspn(x, "="), yl = strcspn(y, "=");
    int r = memcmp(x, y, MIN(xl, yl));
    return r != 0 ? r : (xl > yl) - (xl < yl);
}

/* The filtered environment, computed on the first request and cached for the life of the
 * process (as upstream). */
static pthread_mutex_t metadata_lock = PTHREAD_MUTEX_INITIALIZER;
static char *metadata_body;
static size_t metadata_len;

static void metadata_compute(const char *metadata_prefix)
{
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    _cleanup_free_ const char **vars = calloc(n + 1, sizeof(char *));
    if (!vars)
        return;
    size_t k = 0;
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq && env_name_allowed(*e, (size_t)(eq - *e), metadata_prefix))
            vars[k++] = *e;
    }
    qsort(vars, k, sizeof(char *), cmp_env);
    json_buf b = {0};
    json_buf_lit(&b, "{\"env\":{");
    for (size_t i = 0; i < k; i++) {
        /* Duplicate names: Go's map keeps the last; sorted stably enough, skip earlier ones. */
        if (i + 1 < k && cmp_env(&vars[i], &vars[i + 1]) == 0)
            continue;
        size_t nl = strcspn(vars[i], "=");
        if (b.text.len > strlen("{\"env\":{"))
            json_buf_lit(&b, ",");
        json_buf_string(&b, vars[i], nl);
        json_buf_lit(&b, ":");
        json_buf_string(&b, vars[i] + nl + 1, strlen(vars[i] + nl + 1));
    }
    json_buf_lit(&b, "}}\n");
    metadata_body = json_buf_steal(&b, &metadata_len);
}

enum MHD_Result rest_handle_metadata(rest_request *req, struct MHD_Connection *c)
{
    const char *prefix = req->srv->sd->config->metadata_env_prefix;
    pthread_mutex_lock(&metadata_lock);
    if (!metadata_body)
        metadata_compute(prefix && *prefix ? prefix : "SANDBOX_");
    pthread_mutex_unlock(&metadata_lock);
    if (!metadata_body)
        return rest_queue_error(req, c, STATUS_INTERNAL, "out of memory");
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(metadata_len, metadata_body, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return rest_queue_response(req, c, MHD_HTTP_OK, resp);
}
