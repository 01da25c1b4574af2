/* local/apiserver: the HTTP API (local-apiserver*.c): discovery, CRUD, watch, /status, /metrics
 * and the snapshot subresources over the store; admission of what is written. Internal to the
 * folder: local-apiserver-internal.h (the server struct and the helpers its files share).
 * Includes from other folders of src/local: store, metrics, snapshot (resolving snapshot:
 * images), container (capacity); never from a folder above it (docs/architecture.md, "src/local
 * in rooms"). */
/* The Kubernetes-shaped HTTP API of `asb serve` (libmicrohttpd, thread per connection so watches
 * may block): discovery, CRUD, /status, merge-patch, selectors and watch over a local_store. */
#pragma once

#include <stdint.h>

#include "basic/time-util.h"
#include "local/container/local-capacity.h"
#include "local/store/local-store.h"

typedef struct local_apiserver local_apiserver;

typedef struct local_apiserver_options {
    const char *listen;       /* "127.0.0.1:7443", "[::1]:0" */
    const char *token;        /* bearer token every request must carry */
    local_store *store;       /* borrowed; must outlive the server */
    usec_t bookmark_interval; /* BOOKMARK cadence for watches that allow them */
    /* The machine's (local-capacity.h): pod specs asking beyond it are warned about. NULL: no
     * such warnings. */
    const local_capacity *capacity;
} local_apiserver_options;

/* Starts serving. *ret owned (local_apiserver_stop); *ret_port the bound port. */
int local_apiserver_start(const local_apiserver_options *o, local_apiserver **ret,
                          uint16_t *ret_port, char **ret_error);
/* Stops listening, ends watches (the store must be shut down first to wake them) and frees. */
local_apiserver *local_apiserver_stop(local_apiserver *s);

/* A create hook of one kind, which may write more in the create's transaction (a new claim
 * adopts a warm sandbox):
 *  - prepare runs before the create, outside the store's lock (the object has its name, uid and
 *    timestamps, not yet its resourceVersion) and returns a plan, or NULL: nothing to do (the
 *    create then needs no batch);
 *  - commit runs after the create, inside the same store batch (one transaction, one sync, the
 *    watch events published together) and frees the plan; when it returns 1 with *ret_value
 *    (owned), that goes in the answer's `header`;
 *  - discard frees a plan whose create failed.
 * The client is answered with the object as created, as kube-apiserver would (a watch from its
 * resourceVersion sees what the hook wrote next). */
typedef struct local_apiserver_create_hook {
    void *(*prepare)(void *userdata, const json_t *obj);
    int (*commit)(void *userdata, void *plan, char **ret_value);
    void (*discard)(void *userdata, void *plan);
} local_apiserver_create_hook;
/* Sets (hook non-NULL, copied) or clears the hook of kind k; clearing waits for a running hook
 * to end. */
void local_apiserver_set_create_hook(local_apiserver *s, const api_kind *k, const char *header,
                                     const local_apiserver_create_hook *hook, void *userdata);

/* Maximum request body (kube-apiserver's limit). */
#define APISERVER_MAX_BODY (3u * 1024 * 1024)
