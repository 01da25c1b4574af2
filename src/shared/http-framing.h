/* Request-framing checks shared by sandboxd's REST server and the router: the request-smuggling
 * shapes that Go's net/http refuses (the contract of upstream's sandboxd, spec/UPSTREAM.md §1),
 * answered the way Go answers them. Pure: no allocation, no I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* One request header as received. Neither string needs a terminating NUL. */
typedef struct http_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} http_field;

/* What to answer a refused request: status (400 or 501), reason phrase and Go's body text.
 * All strings are static. */
typedef struct http_framing_error {
    int status;
    const char *reason;
    const char *body;
} http_framing_error;

/* Checks the header section of one request, in Go's order:
 *  - a field name that is empty or not an RFC 9110 token (e.g. "Content-Length " with a space
 *    before the colon)                                          -> 400
 *  - HTTP/1.1 without Host, or more than one Host                -> 400
 *  - HTTP/1.1 Transfer-Encoding other than exactly one "chunked" -> 501
 *    (HTTP/1.0 ignores Transfer-Encoding, as Go does)
 *  - Content-Length values that differ or are not decimal digits -> 400
 *    (identical duplicates are allowed, as Go allows them)
 * `http11` is true for HTTP/1.1 and later. Returns 0 when the request may proceed, else -EINVAL
 * with *ret filled. */
int http_framing_check(const http_field *fields, size_t n, bool http11, http_framing_error *ret);

/* True when name[0..len) equals `want` ignoring ASCII case (want is NUL-terminated). */
bool http_field_is(const char *name, size_t len, const char *want);
