/* The one table mapping errno -> status code -> REST (HTTP status + code name) and gRPC status.
 * Handlers never invent a mapping: they pick a status_code (or derive it from an errno) and the
 * transport layer renders it. Codes use gRPC numbering; STATUS_CONFLICT is REST-only. */
#pragma once

#include <stdarg.h>

typedef enum status_code {
    STATUS_OK = 0,
    STATUS_CANCELLED = 1,
    STATUS_UNKNOWN = 2,
    STATUS_INVALID_ARGUMENT = 3,
    STATUS_DEADLINE_EXCEEDED = 4,
    STATUS_NOT_FOUND = 5,
    STATUS_ALREADY_EXISTS = 6,
    STATUS_PERMISSION_DENIED = 7,
    STATUS_RESOURCE_EXHAUSTED = 8,
    STATUS_FAILED_PRECONDITION = 9,
    STATUS_ABORTED = 10,
    STATUS_OUT_OF_RANGE = 11,
    STATUS_UNIMPLEMENTED = 12,
    STATUS_INTERNAL = 13,
    STATUS_UNAVAILABLE = 14,
    STATUS_DATA_LOSS = 15,
    STATUS_UNAUTHENTICATED = 16,
    STATUS_CONFLICT = 100, /* REST 409 "CONFLICT"; gRPC ABORTED */
} status_code;

/* Path confinement reports "resolution left the root" with this errno. */
#define ERRNO_PATH_ESCAPE EXDEV

/* errno (positive or negative) -> status. ENOENT/ENOTDIR-less lookups: NOT_FOUND; EACCES/EPERM:
 * PERMISSION_DENIED; ERRNO_PATH_ESCAPE: PERMISSION_DENIED; ENOTEMPTY/EEXIST: CONFLICT;
 * EINVAL: INVALID_ARGUMENT; E2BIG/EMSGSIZE: RESOURCE_EXHAUSTED; everything else INTERNAL. */
status_code status_from_errno(int err);

/* "NOT_FOUND", ... (REST `code` field and log text). */
const char *status_name(status_code code);
/* HTTP status for the REST error body. */
unsigned status_http(status_code code);
/* Numeric gRPC status (CONFLICT maps to ABORTED). */
unsigned status_grpc(status_code code);

/* An error with words for a person: a status plus an owned message. */
typedef struct api_error {
    status_code code;
    char *message; /* owned; NULL when code is STATUS_OK */
} api_error;

#define API_ERROR_INIT {STATUS_OK, NULL}

/* Sets *e (freeing any previous message). Returns -1 so callers can `return api_error_set(...)`. */
int api_error_set(api_error *e, status_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int api_error_setv(api_error *e, status_code code, const char *fmt, va_list ap);
void api_error_clear(api_error *e);

/* The HTTP reason phrase of a status code ("Bad Gateway" for 502; "Unknown" for codes not
 * listed): the one table every HTTP/1.1 status line the tree writes takes its words from. */
const char *status_http_reason(int http_status);
