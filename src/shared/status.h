/* The one table mapping errno -> status code -> REST (HTTP status + code name) and gRPC status.
 * Handlers never invent a mapping: they pick a status_code (or derive it from an errno) and the
 * transport layer renders it. Codes use gRPC numbering; STATUS_CONFLICT and STATUS_BAD_GATEWAY
 * are REST-only (no gRPC code of their own). */
#pragma once

#include <stdarg.h>

#include "basic/confine.h" /* ERRNO_PATH_ESCAPE */

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
    STATUS_CONFLICT = 100,     /* REST 409 "CONFLICT"; gRPC ABORTED */
    STATUS_BAD_GATEWAY = 101,  /* REST 502 "BAD_GATEWAY" (a proxy's upstream failed); gRPC
                                  UNAVAILABLE */
    STATUS_URI_TOO_LONG = 102, /* REST 414 "URI_TOO_LONG"; gRPC RESOURCE_EXHAUSTED */
} status_code;

/* errno (positive or negative) -> status. ENOENT/ENOTDIR-less lookups: NOT_FOUND; EACCES/EPERM:
 * PERMISSION_DENIED; ERRNO_PATH_ESCAPE: PERMISSION_DENIED; ENOTEMPTY/EEXIST: CONFLICT;
 * EINVAL: INVALID_ARGUMENT; E2BIG/EMSGSIZE: RESOURCE_EXHAUSTED; everything else INTERNAL. */
status_code status_from_errno(int err);

/* "NOT_FOUND", ... (REST `code` field and log text). */
const char *status_name(status_code code);
/* HTTP status for the REST error body. */
unsigned status_http(status_code code);
/* Numeric gRPC status (CONFLICT maps to ABORTED, BAD_GATEWAY to UNAVAILABLE). */
unsigned status_grpc(status_code code);

/* Kubernetes Status reasons (metav1.StatusReason), each with the HTTP status kube-apiserver
 * answers it with, the status_code it corresponds to and the errno internal code returns for it.
 * The local API server renders its Status replies from these, libasb maps replies back. */
typedef enum kube_reason {
    KUBE_REASON_UNKNOWN = 0, /* "": no reason given, the HTTP status alone decides */
    KUBE_REASON_BAD_REQUEST,
    KUBE_REASON_UNAUTHORIZED,
    KUBE_REASON_FORBIDDEN,
    KUBE_REASON_NOT_FOUND,
    KUBE_REASON_METHOD_NOT_ALLOWED,
    KUBE_REASON_NOT_ACCEPTABLE,
    KUBE_REASON_ALREADY_EXISTS,
    KUBE_REASON_CONFLICT,
    KUBE_REASON_GONE,
    KUBE_REASON_EXPIRED,
    KUBE_REASON_REQUEST_ENTITY_TOO_LARGE,
    KUBE_REASON_UNSUPPORTED_MEDIA_TYPE,
    KUBE_REASON_INVALID,
    KUBE_REASON_INTERNAL_ERROR,
    KUBE_REASON_SERVER_TIMEOUT,
    KUBE_REASON_SERVICE_UNAVAILABLE,
    KUBE_REASON_TIMEOUT,
    KUBE_REASON_MAX,
} kube_reason;

/* What the one table says about a reason. */
typedef struct kube_reason_info {
    const char *name; /* "NotFound", ...; "" for KUBE_REASON_UNKNOWN */
    unsigned http;    /* HTTP status of a Status reply with this reason (500 for UNKNOWN) */
    status_code code;
    int err; /* negative errno for the reason (-EIO when none fits) */
} kube_reason_info;

/* The table's row for r (a static row: never NULL; out-of-range r reads as UNKNOWN). */
const kube_reason_info *kube_reason_info_of(kube_reason r);
/* The reason named `name` (exact, case-sensitive as on the wire); UNKNOWN for NULL or unknown. */
kube_reason kube_reason_from_name(const char *name);
/* The reason kube-apiserver gives an HTTP status when a reply names none: 404 NotFound, 409
 * Conflict, 410 Gone, 422 Invalid, 504 Timeout, other 4xx BadRequest, other 5xx InternalError;
 * UNKNOWN below 400. */
kube_reason kube_reason_from_http(unsigned http);
/* errno (either sign) -> reason: ENOENT NotFound, EEXIST AlreadyExists, EINVAL BadRequest,
 * EACCES/EPERM Forbidden, ESTALE Conflict, everything else InternalError. */
kube_reason kube_reason_from_errno(int err);
/* status_code -> reason (CONFLICT and ABORTED: Conflict; INVALID_ARGUMENT: BadRequest, ...). */
kube_reason kube_reason_from_status(status_code code);

/* The one error value: what failed (negative errno), how the transports render it (status code
 * and, for the Kubernetes API, the reason) and words for a person (message). */
typedef struct api_error {
    status_code code;
    char *message; /* owned; NULL when code is STATUS_OK */
    int err;       /* negative errno the failure stands for; 0 when set from a status alone */
    kube_reason reason; /* KUBE_REASON_UNKNOWN: derived from code when rendered */
} api_error;

/* The other fields start as zero: no message, no errno, KUBE_REASON_UNKNOWN. */
#define API_ERROR_INIT {.code = STATUS_OK}

/* Sets *e (freeing any previous message). Each setter returns api_error_errno(e), a negative
 * errno, so a function that fails can `return api_error_set(err, ...)`. */
int api_error_set(api_error *e, status_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int api_error_setv(api_error *e, status_code code, const char *fmt, va_list ap);
/* Sets *e from a Kubernetes reason (code and errno follow from it). */
int api_error_set_reason(api_error *e, kube_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets *e from an errno (either sign; code and reason follow from it). */
int api_error_set_errno(api_error *e, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The reason a Kubernetes Status reply carries for e (its own, else derived from its code). */
kube_reason api_error_reason(const api_error *e);
/* Negative errno for e (its own, else derived from its reason). */
int api_error_errno(const api_error *e);
void api_error_clear(api_error *e);
static inline void api_error_clearp(api_error *e)
{
    api_error_clear(e);
}

/* The HTTP reason phrase of a status code ("Bad Gateway" for 502; "Unknown" for codes not
 * listed): the one table every HTTP/1.1 status line the tree writes takes its words from. */
const char *status_http_reason(int http_status);
