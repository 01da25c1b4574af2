/* Idle keep-alive connections of the plain transport (libasb-http-plain.c), shared by the whole
 * process: a client that makes several requests to `asb serve` (a claim, then its sandbox) pays
 * for one TCP connection, and the server for one connection thread, instead of one per request.
 * At most ASBI_HTTP_POOL_MAX are kept, each for one "host:port", closed after
 * ASBI_HTTP_POOL_IDLE_MS unused; a forked child starts with none. */
#pragma once

#define ASBI_HTTP_POOL_MAX 4
#define ASBI_HTTP_POOL_IDLE_MS 30000

/* An idle connection to hostport (owned by the caller), or -1. One the server has closed (or
 * that has unexpected bytes waiting) is closed and skipped. */
int asbi_http_pool_take(const char *hostport);
/* Keeps fd (ownership passes) for the next request to hostport; closes it when full. */
void asbi_http_pool_put(const char *hostport, int fd);
