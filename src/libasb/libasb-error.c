/* The public error enum, its text, the thread's last error and the mapping from Kubernetes
 * Status replies (reason first, HTTP status otherwise). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "libasb/libasb-internal.h"
#include "shared/status.h"

static const struct {
    int code;
    const char *text;
} error_texts[] = {
    {ASB_OK, "success"},
    {ASB_ERROR, "error"},
    {ASB_ENOMEM, "out of memory"},
    {ASB_EINVAL, "invalid argument"},
    {ASB_ENOTFOUND, "not found"},
    {ASB_EEXISTS, "already exists"},
    {ASB_ECONFLICT, "conflict"},
    {ASB_EINVALID, "invalid object"},
    {ASB_EBADREQUEST, "bad request"},
    {ASB_EUNAUTHORIZED, "unauthorized"},
    {ASB_EFORBIDDEN, "forbidden"},
    {ASB_EEXPIRED, "resource version expired"},
    {ASB_ESERVER, "server error"},
    {ASB_ECONNECT, "connection failed"},
    {ASB_ETIMEOUT, "timed out"},
    {ASB_ECANCELLED, "cancelled"},
    {ASB_EPROTOCOL, "unexpected reply from server"},
    {ASB_ECONFIG, "no server configured"},
    {ASB_EMANIFEST, "bad manifest"},
    {ASB_EUNKNOWNKIND, "unknown kind"},
    {ASB_ECLAIMFAILED, "claim failed"},
    {ASB_ETERMINAL, "will not become ready"},
};

ASB_PUBLIC const char *asb_strerror(int code)
{
    for (size_t i = 0; i < sizeof(error_texts) / sizeof(error_texts[0]); i++)
        if (error_texts[i].code == code)
            return error_texts[i].text;
    return "unknown error";
}

/* Per-thread last error. The strings are heap copies; a failed copy degrades to the static text
 * of the code rather than failing the caller. */
static __thread asb_error last;
static __thread char *last_message, *last_reason;
static __thread int last_set;

/* The strings of a thread's last error are freed when the thread exits (a key destructor runs
 * while the exiting thread's __thread variables are still valid). */
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static int exit_key_ok;

static void on_thread_exit(void *unused)
{
    asb_error_clear();
}

static void exit_key_create(void)
{
    exit_key_ok = pthread_key_create(&exit_key, on_thread_exit) == 0;
}

ASB_PUBLIC const asb_error *asb_error_last(void)
{
    return last_set ? &last : NULL;
}

ASB_PUBLIC void asb_error_clear(void)
{
    free(last_message);
    free(last_reason);
    last_message = last_reason = NULL;
    last = (asb_error){0};
    last_set = 0;
}

int asbi_error_set(int code, int http_status, const char *reason, const char *fmt, ...)
{
    asb_error_clear();
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&last_message, fmt, ap) < 0)
            last_message = NULL;
        va_end(ap);
    }
    last_reason = reason ? strdup(reason) : NULL;
    pthread_once(&exit_key_once, exit_key_create);
    if (exit_key_ok)
        pthread_setspecific(exit_key, (void *)1);
    last.code = code;
    last.http_status = http_status;
    last.message = last_message ? last_message : asb_strerror(code);
    last.reason = last_reason ? last_reason : "";
    last_set = 1;
    return code;
}

/* libasb's code for each Kubernetes reason of the one table (shared/status.h): a reply's reason
 * decides, its HTTP status only when the reason is missing or unknown. */
static const int reason_codes[KUBE_REASON_MAX] = {
    [KUBE_REASON_UNKNOWN] = ASB_EPROTOCOL,
    [KUBE_REASON_BAD_REQUEST] = ASB_EBADREQUEST,
    [KUBE_REASON_UNAUTHORIZED] = ASB_EUNAUTHORIZED,
    [KUBE_REASON_FORBIDDEN] = ASB_EFORBIDDEN,
    [KUBE_REASON_NOT_FOUND] = ASB_ENOTFOUND,
    [KUBE_REASON_METHOD_NOT_ALLOWED] = ASB_EBADREQUEST,
    [KUBE_REASON_NOT_ACCEPTABLE] = ASB_EBADREQUEST,
    [KUBE_REASON_ALREADY_EXISTS] = ASB_EEXISTS,
    [KUBE_REASON_CONFLICT] = ASB_ECONFLICT,
    [KUBE_REASON_GONE] = ASB_EEXPIRED,
    [KUBE_REASON_EXPIRED] = ASB_EEXPIRED,
    [KUBE_REASON_REQUEST_ENTITY_TOO_LARGE] = ASB_EBADREQUEST,
    [KUBE_REASON_UNSUPPORTED_MEDIA_TYPE] = ASB_EBADREQUEST,
    [KUBE_REASON_INVALID] = ASB_EINVALID,
    [KUBE_REASON_INTERNAL_ERROR] = ASB_ESERVER,
    [KUBE_REASON_SERVER_TIMEOUT] = ASB_ESERVER,
    [KUBE_REASON_SERVICE_UNAVAILABLE] = ASB_ESERVER,
    [KUBE_REASON_TIMEOUT] = ASB_ETIMEOUT,
};

int asbi_error_from_status(int http_status, const char *reason)
{
    kube_reason r = kube_reason_from_name(reason);
    if (r == KUBE_REASON_UNKNOWN)
        r = kube_reason_from_http(http_status > 0 ? (unsigned)http_status : 0);
    return reason_codes[r];
}

int asbi_error_from_reply(int http_status, const char *body, size_t len)
{
    json_t *st = body ? json_loadb(body, len, 0, NULL) : NULL;
    const char *reason = NULL, *message = NULL;
    if (json_is_object(st) && json_is_string(json_object_get(st, "kind")) &&
        strcmp(json_string_value(json_object_get(st, "kind")), "Status") == 0) {
        reason = json_string_value(json_object_get(st, "reason"));
        message = json_string_value(json_object_get(st, "message"));
        json_t *c = json_object_get(st, "code");
        if (json_is_integer(c) && http_status == 0)
            http_status = (int)json_integer_value(c);
    }
    int code = asbi_error_from_status(http_status, reason);
    if (message && *message)
        asbi_error_set(code, http_status, reason, "%s", message);
    else if (body && len > 0 && !st)
        asbi_error_set(code, http_status, reason, "HTTP %d: %.*s", http_status,
                       (int)(len > 200 ? 200 : len), body);
    else
        asbi_error_set(code, http_status, reason, "HTTP %d (%s)", http_status, asb_strerror(code));
    json_decref(st);
    return code;
}

static int code_of_errno(int err)
{
    switch (-err) {
    case ENOMEM:
        return ASB_ENOMEM;
    case EINVAL:
        return ASB_EINVAL;
    case EACCES:
    case EPERM:
        return ASB_EFORBIDDEN;
    case ENOENT:
        return ASB_ENOTFOUND;
    case EEXIST:
        return ASB_EEXISTS;
    case ETIMEDOUT:
        return ASB_ETIMEOUT;
    case ECANCELED:
        return ASB_ECANCELLED;
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ENOTCONN:
    case EHOSTUNREACH:
    case ENETUNREACH:
        return ASB_ECONNECT;
    case EPROTO:
    case EBADMSG:
        return ASB_EPROTOCOL;
    default:
        return ASB_ERROR;
    }
}

int asbi_error_from(int err, const api_error *e)
{
    if (err >= 0)
        return ASB_OK;
    int code = code_of_errno(err);
    if (e && e->message)
        return asbi_error_set(code, 0, NULL, "%s", e->message);
    return asbi_error_set(code, 0, NULL, "%s", err == -ENOMEM ? "out of memory" : strerror(-err));
}

ASB_PUBLIC const char *asb_version(void)
{
    return ASB_VERSION;
}

ASB_PUBLIC void asb_free(void *ptr)
{
    free(ptr);
}
