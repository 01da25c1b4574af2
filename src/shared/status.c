#include "shared/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    status_code code;
    const char *name;
    unsigned http;
    unsigned grpc;
} status_table[] = {
    {STATUS_OK, "OK", 200, 0},
    {STATUS_CANCELLED, "CANCELLED", 499, 1},
    {STATUS_UNKNOWN, "UNKNOWN", 500, 2},
    {STATUS_INVALID_ARGUMENT, "INVALID_ARGUMENT", 400, 3},
    {STATUS_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED", 504, 4},
    {STATUS_NOT_FOUND, "NOT_FOUND", 404, 5},
    {STATUS_ALREADY_EXISTS, "ALREADY_EXISTS", 409, 6},
    {STATUS_PERMISSION_DENIED, "PERMISSION_DENIED", 403, 7},
    {STATUS_RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED", 413, 8},
    {STATUS_FAILED_PRECONDITION, "FAILED_PRECONDITION", 412, 9},
    {STATUS_ABORTED, "ABORTED", 409, 10},
    {STATUS_OUT_OF_RANGE, "OUT_OF_RANGE", 416, 11},
    {STATUS_UNIMPLEMENTED, "UNIMPLEMENTED", 501, 12},
    {STATUS_INTERNAL, "INTERNAL", 500, 13},
    {STATUS_UNAVAILABLE, "UNAVAILABLE", 503, 14},
    {STATUS_DATA_LOSS, "DATA_LOSS", 500, 15},
    {STATUS_UNAUTHENTICATED, "UNAUTHENTICATED", 401, 16},
    {STATUS_CONFLICT, "CONFLICT", 409, 10},
    {STATUS_BAD_GATEWAY, "BAD_GATEWAY", 502, 14},
    {STATUS_URI_TOO_LONG, "URI_TOO_LONG", 414, 8},
};

static size_t status_index(status_code code)
{
    for (size_t i = 0; i < sizeof(status_table) / sizeof(status_table[0]); i++)
        if (status_table[i].code == code)
            return i;
    return 2; /* UNKNOWN */
}

status_code status_from_errno(int err)
{
    if (err < 0)
        err = -err;
    switch (err) {
    case 0:
        return STATUS_OK;
    case ENOENT:
        return STATUS_NOT_FOUND;
    case EACCES:
    case EPERM:
    case ERRNO_PATH_ESCAPE:
        return STATUS_PERMISSION_DENIED;
    case ENOTEMPTY:
    case EEXIST:
        return STATUS_CONFLICT;
    case EINVAL:
        return STATUS_INVALID_ARGUMENT;
    case E2BIG:
    case EMSGSIZE:
        return STATUS_RESOURCE_EXHAUSTED;
    default:
        return STATUS_INTERNAL;
    }
}

const char *status_name(status_code code)
{
    return status_table[status_index(code)].name;
}

unsigned status_http(status_code code)
{
    return status_table[status_index(code)].http;
}

unsigned status_grpc(status_code code)
{
    return status_table[status_index(code)].grpc;
}

static const kube_reason_info kube_reason_table[KUBE_REASON_MAX] = {
    [KUBE_REASON_UNKNOWN] = {"", 500, STATUS_UNKNOWN, -EIO},
    [KUBE_REASON_BAD_REQUEST] = {"BadRequest", 400, STATUS_INVALID_ARGUMENT, -EINVAL},
    [KUBE_REASON_UNAUTHORIZED] = {"Unauthorized", 401, STATUS_UNAUTHENTICATED, -EACCES},
    [KUBE_REASON_FORBIDDEN] = {"Forbidden", 403, STATUS_PERMISSION_DENIED, -EPERM},
    [KUBE_REASON_NOT_FOUND] = {"NotFound", 404, STATUS_NOT_FOUND, -ENOENT},
    [KUBE_REASON_METHOD_NOT_ALLOWED] = {"MethodNotAllowed", 405, STATUS_UNIMPLEMENTED, -EOPNOTSUPP},
    [KUBE_REASON_NOT_ACCEPTABLE] = {"NotAcceptable", 406, STATUS_INVALID_ARGUMENT, -EINVAL},
    [KUBE_REASON_ALREADY_EXISTS] = {"AlreadyExists", 409, STATUS_ALREADY_EXISTS, -EEXIST},
    [KUBE_REASON_CONFLICT] = {"Conflict", 409, STATUS_CONFLICT, -ESTALE},
    [KUBE_REASON_GONE] = {"Gone", 410, STATUS_OUT_OF_RANGE, -ESTALE},
    [KUBE_REASON_EXPIRED] = {"Expired", 410, STATUS_OUT_OF_RANGE, -ESTALE},
    [KUBE_REASON_REQUEST_ENTITY_TOO_LARGE] = {"RequestEntityTooLarge", 413,
                                              STATUS_RESOURCE_EXHAUSTED, -E2BIG},
    [KUBE_REASON_UNSUPPORTED_MEDIA_TYPE] = {"UnsupportedMediaType", 415, STATUS_INVALID_ARGUMENT,
                                            -EINVAL},
    [KUBE_REASON_INVALID] = {"Invalid", 422, STATUS_INVALID_ARGUMENT, -EINVAL},
    [KUBE_REASON_INTERNAL_ERROR] = {"InternalError", 500, STATUS_INTERNAL, -EIO},
    [KUBE_REASON_SERVER_TIMEOUT] = {"ServerTimeout", 500, STATUS_UNAVAILABLE, -EAGAIN},
    [KUBE_REASON_SERVICE_UNAVAILABLE] = {"ServiceUnavailable", 503, STATUS_UNAVAILABLE, -EAGAIN},
    [KUBE_REASON_TIMEOUT] = {"Timeout", 504, STATUS_DEADLINE_EXCEEDED, -ETIMEDOUT},
};

const kube_reason_info *kube_reason_info_of(kube_reason r)
{
    return &kube_reason_table[(unsigned)r < KUBE_REASON_MAX ? r : KUBE_REASON_UNKNOWN];
}

kube_reason kube_reason_from_name(const char *name)
{
    if (!name || !*name)
        return KUBE_REASON_UNKNOWN;
    for (unsigned r = 1; r < KUBE_REASON_MAX; r++)
        if (strcmp(kube_reason_table[r].name, name) == 0)
            return (kube_reason)r;
    return KUBE_REASON_UNKNOWN;
}

kube_reason kube_reason_from_http(unsigned http)
{
    switch (http) {
    case 409:
        return KUBE_REASON_CONFLICT;
    case 410:
        return KUBE_REASON_GONE;
    case 500:
        return KUBE_REASON_INTERNAL_ERROR;
    }
    /* The first reason with this status (409/410/500 are shared and settled above). */
    for (unsigned r = 1; r < KUBE_REASON_MAX; r++)
        if (kube_reason_table[r].http == http)
            return (kube_reason)r;
    if (http >= 500)
        return KUBE_REASON_INTERNAL_ERROR;
    if (http >= 400)
        return KUBE_REASON_BAD_REQUEST;
    return KUBE_REASON_UNKNOWN;
}

kube_reason kube_reason_from_errno(int err)
{
    if (err < 0)
        err = -err;
    switch (err) {
    case ENOENT:
        return KUBE_REASON_NOT_FOUND;
    case EEXIST:
        return KUBE_REASON_ALREADY_EXISTS;
    case EINVAL:
        return KUBE_REASON_BAD_REQUEST;
    case EACCES:
    case EPERM:
        return KUBE_REASON_FORBIDDEN;
    case ESTALE:
        return KUBE_REASON_CONFLICT;
    default:
        return KUBE_REASON_INTERNAL_ERROR;
    }
}

kube_reason kube_reason_from_status(status_code code)
{
    switch (code) {
    case STATUS_OK:
        return KUBE_REASON_UNKNOWN;
    case STATUS_INVALID_ARGUMENT:
        return KUBE_REASON_BAD_REQUEST;
    case STATUS_NOT_FOUND:
        return KUBE_REASON_NOT_FOUND;
    case STATUS_ALREADY_EXISTS:
        return KUBE_REASON_ALREADY_EXISTS;
    case STATUS_CONFLICT:
    case STATUS_ABORTED:
        return KUBE_REASON_CONFLICT;
    case STATUS_PERMISSION_DENIED:
        return KUBE_REASON_FORBIDDEN;
    case STATUS_UNAUTHENTICATED:
        return KUBE_REASON_UNAUTHORIZED;
    case STATUS_RESOURCE_EXHAUSTED:
        return KUBE_REASON_REQUEST_ENTITY_TOO_LARGE;
    case STATUS_UNIMPLEMENTED:
        return KUBE_REASON_METHOD_NOT_ALLOWED;
    case STATUS_DEADLINE_EXCEEDED:
        return KUBE_REASON_TIMEOUT;
    case STATUS_UNAVAILABLE:
    case STATUS_BAD_GATEWAY:
        return KUBE_REASON_SERVICE_UNAVAILABLE;
    default:
        return KUBE_REASON_INTERNAL_ERROR;
    }
}

int api_error_setv(api_error *e, status_code code, const char *fmt, va_list ap)
{
    free(e->message);
    e->code = code;
    e->err = 0;
    e->reason = KUBE_REASON_UNKNOWN;
    if (vasprintf(&e->message, fmt, ap) < 0)
        e->message = NULL;
    return api_error_errno(e);
}

int api_error_set(api_error *e, status_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    api_error_setv(e, code, fmt, ap);
    va_end(ap);
    return api_error_errno(e);
}

int api_error_set_reason(api_error *e, kube_reason reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const kube_reason_info *info = kube_reason_info_of(reason);
    api_error_setv(e, info->code, fmt, ap);
    va_end(ap);
    e->reason = (kube_reason)(info - kube_reason_table);
    e->err = info->err;
    return api_error_errno(e);
}

int api_error_set_errno(api_error *e, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    api_error_setv(e, status_from_errno(err), fmt, ap);
    va_end(ap);
    e->err = err > 0 ? -err : err;
    e->reason = kube_reason_from_errno(err);
    return api_error_errno(e);
}

kube_reason api_error_reason(const api_error *e)
{
    return e->reason != KUBE_REASON_UNKNOWN ? e->reason : kube_reason_from_status(e->code);
}

int api_error_errno(const api_error *e)
{
    return e->err != 0 ? e->err : kube_reason_info_of(api_error_reason(e))->err;
}

void api_error_clear(api_error *e)
{
    free(e->message);
    *e = (api_error)API_ERROR_INIT;
}

const char *status_http_reason(int http_status)
{
    static const struct {
        int status;
        const char *reason;
    } reasons[] = {
        {100, "Continue"},
        {101, "Switching Protocols"},
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {204, "No Content"},
        {206, "Partial Content"},
        {301, "Moved Permanently"},
        {302, "Found"},
        {303, "See Other"},
        {304, "Not Modified"},
        {307, "Temporary Redirect"},
        {308, "Permanent Redirect"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {411, "Length Required"},
        {412, "Precondition Failed"},
        {413, "Payload Too Large"},
        {414, "URI Too Long"},
        {415, "Unsupported Media Type"},
        {416, "Range Not Satisfiable"},
        {417, "Expectation Failed"},
        {422, "Unprocessable Entity"},
        {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {499, "Client Closed Request"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
        {505, "HTTP Version Not Supported"},
    };
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (reasons[i].status == http_status)
            return reasons[i].reason;
    return "Unknown";
}
