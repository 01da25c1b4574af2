/* Request-framing checks shared by sandboxd's REST server and the router: the request-smuggling
 * shapes that Go's net/http refuses (the contract of upstream's sandboxd, spec/UPSTREAM.md §1),
 * answered the way Go answers them. No I/O; allocates only the message of a refusal. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "shared/status.h"

/* One request header as received. Neither string needs a terminating NUL. */
typedef struct http_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} http_field;

/* Checks the header section of one request, in Go's order:
 *  - a field name that is empty or not an RFC 9110 token (e.g. "Content-Length " with a space
 *    before the colon)                                          -> 400
 *  - HTTP/1.1 without Host, or more than one Host                -> 400
 *  - HTTP/1.1 Transfer-Encoding other than exactly one "chunked" -> 501
 *    (HTTP/1.0 ignores Transfer-Encoding, as Go does)
 *  - Content-Length values that differ or are not decimal digits -> 400
 *    (identical duplicates are allowed, as Go allows them)
 * `http11` is true for HTTP/1.1 and later. Returns 0 when the request may proceed, else a
 * negative errno with *err saying what to answer: its message is Go's body text, its code gives
 * the HTTP status (status_http(): STATUS_INVALID_ARGUMENT 400, STATUS_UNIMPLEMENTED 501; the
 * reason phrase from status_http_reason()). */
int http_framing_check(const http_field *fields, size_t n, bool http11, api_error *err);

/* True when name[0..len) equals `want` ignoring ASCII case (want is NUL-terminated). */
bool http_field_is(const char *name, size_t len, const char *want);
