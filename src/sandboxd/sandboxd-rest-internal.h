/* Internals shared by the sandboxd-rest-*.c files: the server, the per-request context, and the
 * helpers each concern exports to the others. Not part of the sandboxd API. */
#pragma once

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "basic/buf.h"
#include "sandboxd/sandboxd-rest.h"
#include "sandboxd/sandboxd.h"
#include "shared/status.h"

#define REST_MAX_DAEMONS 3

/* Where a connection is (sandboxd-rest-conns.c): sending a request head (cut at the header
 * timeout), carrying a request whose head is complete (never cut), or idle between requests
 * (cut at the idle timeout). */
typedef enum rest_conn_phase { REST_CONN_HEAD, REST_CONN_BUSY, REST_CONN_IDLE } rest_conn_phase;

/* One client connection. Every field is guarded by rest_server.conns_lock. */
typedef struct rest_conn {
    int fd;
    bool busy; /* a request is in flight (closed after its response when draining) */
    rest_conn_phase phase;
    usec_t since; /* CLOCK_MONOTONIC when the phase began */
    bool cut;     /* shut down by the watchdog or to make room; closing */
    struct rest_conn *prev, *next;
} rest_conn;

struct rest_server {
    sandboxd *sd;
    struct MHD_Daemon *daemons[REST_MAX_DAEMONS];
    size_t n_daemons;
    char *socket_path; /* unix socket we created (unlinked at free), or NULL */
    atomic_uint active;
    atomic_bool stopping;
    pthread_mutex_t conns_lock;
    rest_conn *conns;        /* open connections, all listeners */
    unsigned n_conns, n_cut; /* open / of which cut and closing */
    unsigned max_conns;      /* --max-connections */
    usec_t header_timeout;   /* --header-timeout, 0: none */
    usec_t idle_timeout;     /* --http-idle-timeout, 0: none */
    pthread_t watchdog;      /* cuts connections past their deadline */
    pthread_cond_t watchdog_cond;
    usec_t watchdog_wake;    /* the deadline the watchdog sleeps until; USEC_NEVER: none */
    bool watchdog_running, watchdog_stop;
};

typedef struct rest_put rest_put;

/* One HTTP request. Allocated by the URI log callback (raw request target), freed by the
 * completion callback. */
typedef struct rest_request {
    rest_server *srv;
    char *raw_uri;   /* owned: request target as sent */
    char *query;     /* borrowed into raw_uri: text after '?', or NULL */
    char *file_path; /* owned: decoded {path...} for /v1/files/ routes */
    bool seen;       /* first access-handler call done */
    bool dispatched; /* routed (a response is queued or an upload is running) */
    rest_put *put;   /* owned: PUT upload state */
    rest_conn *conn; /* borrowed: the connection carrying the request, or NULL */
} rest_request;

/* --- sandboxd-rest-conns.c: header deadline, connection cap --- */

/* Initialises conns_lock and starts the watchdog. Returns 0 or a negative errno. */
int rest_conns_init(rest_server *s);
/* Stops the watchdog (the lock stays usable until the server is freed). */
void rest_conns_done(rest_server *s);
/* libmicrohttpd callbacks (cls: the rest_server): accept policy (makes room at the cap) and
 * connection start/close. */
enum MHD_Result rest_conns_on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void rest_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
/* Moves rc (may be NULL) to `phase`; REST_CONN_HEAD only restarts the clock of an idle
 * connection (a fresh connection's head began at accept). */
void rest_conn_set_phase(rest_server *s, rest_conn *rc, rest_conn_phase phase);

/* --- sandboxd-rest-mux.c: Go ServeMux behaviour, pure helpers --- */

/* Go net/http cleanPath on the escaped path. Returns a new string or NULL on ENOMEM. */
char *rest_mux_clean_path(const char *path);
/* Checks that every '%' is followed by two hex digits (Go url parsing). */
bool rest_mux_valid_escapes(const char *s, size_t len);
/* Percent-decodes s[0..len) into a new string (no '+' handling); with `plus` also '+' -> ' '.
 * Returns -EINVAL on an invalid escape, -ENOMEM. *ret_len gets the decoded length (may contain
 * NUL bytes). */
int rest_unescape(const char *s, size_t len, bool plus, char **ret, size_t *ret_len);
/* Go url.Query().Get(key) on a raw query string: first value, or NULL when absent. Returns 0,
 * -ENOMEM. *ret is owned by the caller. */
int rest_query_get(const char *query, const char *key, char **ret);

/* --- sandboxd-rest-json.c --- */

/* Go-compatible JSON text built in a buf; an allocation failure is remembered (oom) so a
 * writer can append freely and check once, at json_buf_steal(). */
typedef struct json_buf {
    buf text;
    bool oom;
} json_buf;

void json_buf_raw(json_buf *b, const char *s, size_t n);
void json_buf_lit(json_buf *b, const char *s);
/* Appends a JSON string literal as Go's encoding/json writes it (HTML-safe escaping, invalid UTF-8
 * bytes as \ufffd, U+2028/U+2029 escaped). */
void json_buf_string(json_buf *b, const char *s, size_t n);
/* Returns the finished text (owned by the caller) or NULL on ENOMEM. */
char *json_buf_steal(json_buf *b, size_t *ret_len);
void json_buf_done(json_buf *b);

/* Queue helpers. Each returns the MHD result of queueing. */
enum MHD_Result rest_queue_response(rest_request *req, struct MHD_Connection *c, unsigned status,
                                    struct MHD_Response *resp);
enum MHD_Result rest_queue_buffer(rest_request *req, struct MHD_Connection *c, unsigned status,
                                  const char *content_type, char *body, size_t len);
enum MHD_Result rest_queue_json(rest_request *req, struct MHD_Connection *c, unsigned status,
                                json_buf *b);
enum MHD_Result rest_queue_text(rest_request *req, struct MHD_Connection *c, unsigned status,
                                const char *text);
enum MHD_Result rest_queue_error(rest_request *req, struct MHD_Connection *c, status_code code,
                                 const char *message);
enum MHD_Result rest_queue_api_error(rest_request *req, struct MHD_Connection *c,
                                     const api_error *e);
/* Error body text `{"code":...,"message":...}\n` (owned) or NULL. */
char *rest_error_body(status_code code, const char *message, size_t *ret_len);

/* --- sandboxd-rest-range.c --- */

typedef struct rest_range {
    int64_t start, length;
} rest_range;

typedef enum {
    RANGE_NONE,       /* no/ignored Range: whole file */
    RANGE_SINGLE,     /* one satisfiable range */
    RANGE_MULTI,      /* several: multipart/byteranges */
    RANGE_NO_OVERLAP, /* 416 with Content-Range bytes * /size */
    RANGE_INVALID,    /* 416 invalid range */
} rest_range_result;

/* Go http parseRange semantics for one file of `size` bytes (RANGE_MULTI leaves *ret untouched). */
rest_range_result rest_range_parse(const char *header, int64_t size, rest_range *ret);
/* All ranges: *ret (owned by the caller, n entries) for RANGE_SINGLE and RANGE_MULTI. */
rest_range_result rest_range_parse_all(const char *header, int64_t size, rest_range **ret,
                                       size_t *ret_n);
/* HTTP-date (IMF-fixdate, RFC 850, asctime) -> seconds since the epoch. 0 or -EINVAL. */
int rest_http_date_parse(const char *s, time_t *ret);
/* Formats t as an IMF-fixdate into out (>= 30 bytes). */
void rest_http_date_format(time_t t, char *out, size_t size);
/* RFC 3339 UTC, whole seconds, into out (>= 32 bytes). */
void rest_rfc3339_format(time_t t, char *out, size_t size);

typedef enum {
    COND_PROCEED,
    COND_NOT_MODIFIED,       /* 304 */
    COND_PRECONDITION_FAILED /* 412 */
} rest_cond_result;

/* Go http.ServeContent checkPreconditions for a file with mtime `mtime` (no ETag). Headers may
 * be NULL. *ret_use_range is false when If-Range says to ignore Range. */
rest_cond_result rest_check_preconditions(bool get_or_head, time_t mtime, const char *if_match,
                                          const char *if_unmodified_since,
                                          const char *if_none_match, const char *if_modified_since,
                                          const char *range, const char *if_range,
                                          bool *ret_use_range);

/* multipart/byteranges response streaming `n` ranges of fd (taken over on success; the caller
 * keeps it on failure). *ret_content_type (owned) gets the Content-Type with the boundary. */
struct MHD_Response *rest_byteranges_response(int fd, const rest_range *ranges, size_t n,
                                              int64_t size, char **ret_content_type);

/* --- handlers --- */
enum MHD_Result rest_handle_get(rest_request *req, struct MHD_Connection *c, bool head);
enum MHD_Result rest_handle_delete(rest_request *req, struct MHD_Connection *c);
enum MHD_Result rest_handle_put(rest_request *req, struct MHD_Connection *c, const char *data,
                                size_t *data_size);
void rest_put_free(rest_put *p);
enum MHD_Result rest_handle_health(rest_request *req, struct MHD_Connection *c);
enum MHD_Result rest_handle_metadata(rest_request *req, struct MHD_Connection *c);

/* --- sandboxd-rest-put.c helpers (pure) --- */
/* `^0[0-7]{3}$` -> mode. 0 or -EINVAL. */
int rest_parse_mode(const char *s, mode_t *ret);

/* --- sandboxd-rest-multipart.c: the `file` part of a multipart/form-data body --- */
typedef struct rest_multipart rest_multipart;
/* Called with consecutive bytes of the first part named "file"; `first` on its first call (also
 * called once with size 0 for an empty part). Returns 0 or a negative errno to abort. */
typedef int (*rest_multipart_sink)(void *payload, const char *data, size_t size, bool first);
/* Starts parsing the body of connection `c` (its Content-Type carries the boundary). Returns NULL
 * and sets *err when the body cannot be multipart. */
rest_multipart *rest_multipart_new(struct MHD_Connection *c, rest_multipart_sink sink,
                                   void *payload, api_error *err);
/* Feeds body bytes. 0, or -1 with *err set (malformed body or sink failure). */
int rest_multipart_feed(rest_multipart *m, const char *data, size_t size, api_error *err);
/* End of body: 0, or -1 with *err set (malformed, or no "file" part). */
int rest_multipart_finish(rest_multipart *m, api_error *err);
/* The sink's last failure (negative errno) or 0. */
int rest_multipart_sink_error(rest_multipart *m);
rest_multipart *rest_multipart_free(rest_multipart *m);
/* Whether a Content-Type value is multipart/form-data (Go mime.ParseMediaType, case-insensitive).
 */
bool rest_is_multipart_form(const char *content_type);

/* Common message texts (§1.4). */
#define MSG_ESCAPE "path traversal outside sandbox root is forbidden"
#define MSG_NOT_FOUND "path does not exist within the sandbox"
#define MSG_DENIED "permission denied"

/* Maps a confine_resolve failure to an API error (403 escape, 500 otherwise). */
void rest_confine_error(api_error *e, int r);
