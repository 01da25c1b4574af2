#include "shared/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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

int api_error_setv(api_error *e, status_code code, const char *fmt, va_list ap)
{
    free(e->message);
    e->code = code;
    if (vasprintf(&e->message, fmt, ap) < 0)
        e->message = NULL;
    return -1;
}

int api_error_set(api_error *e, status_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    api_error_setv(e, code, fmt, ap);
    va_end(ap);
    return -1;
}

void api_error_clear(api_error *e)
{
    free(e->message);
    e->message = NULL;
    e->code = STATUS_OK;
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
