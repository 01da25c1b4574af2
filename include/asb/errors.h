/* libasb: the one stable error enum, its text, and the last error's details (thread-local, as
 * libgit2's git_error_last()). Every function returns ASB_OK (0) or a negative asb_error_code. */
#ifndef ASB_ERRORS_H
#define ASB_ERRORS_H

#include "asb/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values are stable: new codes are only ever appended. Some equal errno values by number
 * (ASB_ESERVER is -12, as is -ENOMEM), yet they never collide: no public function returns an
 * errno; every internal failure is turned into one of these codes at the library's boundary. */
typedef enum asb_error_code {
    ASB_OK = 0,
    ASB_ERROR = -1,         /* anything not covered below */
    ASB_ENOMEM = -2,        /* out of memory */
    ASB_EINVAL = -3,        /* bad argument from the caller (NULL name, bad URL, bad options) */
    ASB_ENOTFOUND = -4,     /* 404 NotFound */
    ASB_EEXISTS = -5,       /* 409 AlreadyExists */
    ASB_ECONFLICT = -6,     /* 409 Conflict (stale resourceVersion, precondition) */
    ASB_EINVALID = -7,      /* 422 Invalid: the server rejected the object (message has fields) */
    ASB_EBADREQUEST = -8,   /* 400 BadRequest and other 4xx */
    ASB_EUNAUTHORIZED = -9, /* 401 Unauthorized: missing or wrong token */
    ASB_EFORBIDDEN = -10,   /* 403 Forbidden */
    ASB_EEXPIRED = -11,     /* 410 Expired/Gone: watch resourceVersion too old */
    ASB_ESERVER = -12,      /* 5xx from the server */
    ASB_ECONNECT = -13,     /* could not connect, or the connection failed */
    ASB_ETIMEOUT = -14,     /* a deadline passed */
    ASB_ECANCELLED = -15,   /* cancelled by the caller */
    ASB_EPROTOCOL = -16,    /* a reply that is not what the API promises */
    ASB_ECONFIG = -17,      /* no server/token configured, state directory unreadable */
    ASB_EMANIFEST = -18,    /* a YAML/JSON manifest that cannot be parsed */
    ASB_EUNKNOWNKIND = -19, /* a kind name that is none of the four kinds */
    ASB_ECLAIMFAILED = -20, /* a SandboxClaim ended in a terminal condition (reason says which:
                               InvalidMetadata, ClaimExpired, ...) or was deleted while waiting */
    ASB_ETERMINAL = -21,    /* a wait for Ready=True that cannot be met: the Sandbox is in a
                               condition it does not leave without a spec change (the error's
                               reason says which: ImageNotSupported, SandboxExpired, ...) */
} asb_error_code;

/* Details of the last error on this thread. */
typedef struct asb_error {
    int code;            /* asb_error_code */
    const char *message; /* human text, never NULL ("" when none) */
    const char *reason;  /* Kubernetes Status reason ("NotFound"), or "" when not from a Status */
    int http_status;     /* HTTP status of the reply, 0 when there was none */
} asb_error;

/* Short constant text for a code ("not found"). Never NULL; unknown codes give "unknown error". */
ASB_PUBLIC const char *asb_strerror(int code);

/* The last error set by a libasb call on this thread, or NULL when the last failing call set
 * none. Borrowed: valid until the next libasb call on the same thread. Successful calls do not
 * clear it. */
ASB_PUBLIC const asb_error *asb_error_last(void);

/* Forgets the last error of this thread. */
ASB_PUBLIC void asb_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
