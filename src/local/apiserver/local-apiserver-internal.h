/* Shared between the local-apiserver*.c files. */
#pragma once

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>

#include "api/api.h"
#include "local/apiserver/local-apiserver.h"
#include "shared/status.h"

struct local_apiserver {
    struct MHD_Daemon *daemon;
    char *token;
    local_store *store;
    usec_t bookmark_interval;
    uint16_t port;
    bool has_capacity;
    local_capacity capacity;
    /* local_apiserver_set_create_hook: read-held while a hook runs, so clearing it waits. */
    pthread_rwlock_t hook_lock;
    const api_kind *hook_kind;
    local_apiserver_create_hook hook; /* hook.prepare NULL: none */
    void *hook_data;
    const char *hook_header; /* the header its answer goes in */
};

/* One parsed resource request. */
typedef struct api_request {
    local_apiserver *srv;
    struct MHD_Connection *conn;
    const char *method;
    const api_kind *kind;
    const char *ns;   /* NULL: all namespaces (cluster-wide list) */
    const char *name; /* NULL: collection */
    bool status;      /* /status subresource */
    bool scale;       /* /scale subresource (autoscaling/v1 Scale) */
    const char *body;
    size_t body_len;
} api_request;

/* Queue a JSON response; steals j. */
enum MHD_Result reply_json(struct MHD_Connection *c, unsigned code, json_t *j);
/* The same with one `Warning: 299 - "text"` header per string of warnings (borrowed, may be
 * NULL), at most WARNING_MAX_COUNT of them and WARNING_MAX_TOTAL bytes in all, each text cut to
 * WARNING_MAX_TEXT bytes; one last Warning says how many more were left out. */
#define WARNING_MAX_COUNT 64
#define WARNING_MAX_TOTAL 4096
#define WARNING_MAX_TEXT 4096
enum MHD_Result reply_json_warnings(struct MHD_Connection *c, unsigned code, json_t *j,
                                    const json_t *warnings);
/* The same with one more header (header or value NULL: none). */
enum MHD_Result reply_json_headers(struct MHD_Connection *c, unsigned code, json_t *j,
                                   const json_t *warnings, const char *header, const char *value);
/* A Status failure (owned; NULL on ENOMEM) whose HTTP code and reason come from the one table in
 * shared/status.h: handlers name a reason, never a number. */
json_t *status_failure(kube_reason reason, const char *message, const api_kind *k,
                       const char *name);
/* Queue a Status failure reply with the HTTP status its `code` field carries; steals st. */
enum MHD_Result reply_failure(struct MHD_Connection *c, json_t *st);
/* The same with Warning headers (a refused object's unknown fields are still worth saying, as
 * kube-apiserver says them on any answer). */
enum MHD_Result reply_failure_warnings(struct MHD_Connection *c, json_t *st,
                                       const json_t *warnings);
/* The Status reply for an api_error: its reason (or the one its status code implies) and its
 * message. */
enum MHD_Result reply_api_error(struct MHD_Connection *c, const api_error *e, const api_kind *k,
                                const char *name);
/* status_failure() with a formatted message, queued. */
enum MHD_Result reply_status(struct MHD_Connection *c, kube_reason reason, const api_kind *k,
                             const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
const char *query(struct MHD_Connection *c, const char *key);
bool query_bool(struct MHD_Connection *c, const char *key);

/* SandboxSnapshot admission (local-apiserver-snapshot.c): 0 to go on, else a negative errno
 * with err saying why (reply with the request's kind and the object's name): creating one for a
 * missing Sandbox (Invalid), deleting one still needed (Conflict). Other kinds: 0. */
int apiserver_snapshot_admit_create(api_request *rq, const json_t *obj, api_error *err);
int apiserver_snapshot_admit_delete(api_request *rq, api_error *err);

enum MHD_Result apiserver_discovery(local_apiserver *srv, struct MHD_Connection *c, char **seg,
                                    size_t nseg);
enum MHD_Result apiserver_watch(api_request *rq);
/* GET /metrics (local-apiserver-metrics.c). */
/* /apis/metrics.k8s.io/v1beta1/...: PodMetrics of the running sandboxes
 * (local-apiserver-podmetrics.c). */
bool apiserver_is_podmetrics(char **seg, size_t n);
enum MHD_Result apiserver_podmetrics(local_apiserver *srv, struct MHD_Connection *c,
                                     const char *method, char **seg, size_t n);
enum MHD_Result apiserver_metrics(local_apiserver *srv, struct MHD_Connection *c,
                                  const char *method);
enum MHD_Result apiserver_resource(api_request *rq);
