/* libasb: the control-plane client. Speaks the Kubernetes-shaped REST API of `asb serve` (and of
 * a kube-apiserver serving the CRDs). Objects travel as JSON text.
 *
 * A client is not thread-safe: use one per thread (they are cheap). Functions block; watches run
 * until their callback stops them, they are cancelled, or their deadline passes. */
#ifndef ASB_CLIENT_H
#define ASB_CLIENT_H

#include "asb/common.h"
#include "asb/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct asb_client asb_client;

/* Log levels passed to asb_log_cb (syslog numbering). */
#define ASB_LOG_ERROR 3
#define ASB_LOG_WARNING 4
#define ASB_LOG_INFO 6
#define ASB_LOG_DEBUG 7

/* The library never writes to stderr; it reports through this callback when one is set. */
typedef void (*asb_log_cb)(int level, const char *message, void *payload);
/* A warning the server sent with a reply (see asb_client_options.warning_cb). */
typedef void (*asb_warning_cb)(const char *text, void *payload);

typedef struct asb_client_options {
    unsigned int version;    /* ASB_CLIENT_OPTIONS_VERSION */
    const char *server;      /* "http://127.0.0.1:7443"; NULL: $ASB_SERVER, then <state>/server */
    const char *token;       /* bearer token; NULL: $ASB_TOKEN, then <state>/token */
    const char *state_dir;   /* NULL: $ASB_STATE_DIR, then /var/lib/asb (root) or
                                ~/.local/state/asb */
    long timeout_ms;         /* per request (not watches); 0: 30000 */
    long connect_timeout_ms; /* 0: 10000 */
    asb_log_cb log_cb;       /* may be NULL */
    void *log_payload;
    /* (version >= 2) Called once per `Warning` header of a server reply (kube-apiserver's
     * deprecation and unknown-field warnings, e.g. `unknown field "spec.foo"`), with the warning's
     * text, unquoted, as client-go's warning handler gets it. NULL: each goes to log_cb at
     * ASB_LOG_WARNING instead. */
    asb_warning_cb warning_cb;
    void *warning_payload;
    /* (version >= 2) "Strict", "Warn" or "Ignore": sent as `fieldValidation` on create, update
     * and patch (what the server does with fields the kind does not declare); NULL: the server's
     * default (Warn). */
    const char *field_validation;
    /* (version >= 3) Nonzero: creates, updates and patches carry `dryRun=All`: the server runs
     * every check (admission, defaults, validation) and answers with the object it would have
     * stored, storing nothing (kubectl's --dry-run=server). */
    int dry_run;
} asb_client_options;

#define ASB_CLIENT_OPTIONS_VERSION 3
/* clang-format off */
#define ASB_CLIENT_OPTIONS_INIT {ASB_CLIENT_OPTIONS_VERSION, NULL, NULL, NULL, 0, 0, NULL, NULL, \
                                 NULL, NULL, NULL, 0}
/* clang-format on */

/* The state directory used when none is given: $ASB_STATE_DIR, else /var/lib/asb as root, else
 * ~/.local/state/asb (the same rule `asb serve` uses). *out is owned by the caller (asb_free).
 * Returns ASB_OK or ASB_ENOMEM. */
ASB_PUBLIC int asb_client_default_state_dir(char **out);

/* Creates a client. opts may be NULL (all defaults). No connection is made yet.
 * *out is owned by the caller (asb_client_free). Returns ASB_OK, ASB_ECONFIG (no server or token
 * found: the message says where it looked), ASB_EINVAL or ASB_ENOMEM. */
ASB_PUBLIC int asb_client_new(asb_client **out, const asb_client_options *opts);

/* Frees a client. Accepts NULL. */
ASB_PUBLIC void asb_client_free(asb_client *client);

/* The server URL the client talks to. Borrowed, valid while the client lives. */
ASB_PUBLIC const char *asb_client_server(const asb_client *client);

/* In every function below, `kind` is any name asb_kind_lookup() accepts and `ns` a namespace
 * (NULL: "default"). Objects returned through `char **out` are JSON text owned by the caller
 * (asb_free); `out` may be NULL when the caller does not want the object. Errors from the server
 * are mapped from its Status: ASB_ENOTFOUND, ASB_EEXISTS, ASB_ECONFLICT, ASB_EINVALID, ...
 * with the Status message in asb_error_last(). */

/* The server's /version document (JSON: kube's version.Info; `asb serve` adds "asbVersion").
 * *out owned (asb_free). */
ASB_PUBLIC int asb_server_version(char **out, asb_client *client);

/* What running sandboxes use, as metrics-server's PodMetrics (`asb serve` reads their cgroups):
 * of the Sandbox name in ns (a PodMetrics; ASB_ENOTFOUND when it has no running container), of
 * every one in ns (name NULL: a PodMetricsList), or in every namespace (ns NULL). Each has
 * `containers[0].usage` `{"cpu": "<nanocores>n", "memory": "<KiB>Ki"}` and the `window` of the
 * CPU rate. *out owned (asb_free). */
ASB_PUBLIC int asb_sandbox_usage(char **out, asb_client *client, const char *ns, const char *name);

/* GET one object. */
ASB_PUBLIC int asb_object_get(char **out, asb_client *client, const char *kind, const char *ns,
                              const char *name);

typedef struct asb_list_options {
    unsigned int version;       /* ASB_LIST_OPTIONS_VERSION */
    const char *label_selector; /* "app=web,tier!=db"; NULL: everything */
    const char *field_selector; /* "metadata.name=x"; NULL: everything */
    int all_namespaces;         /* non-zero: ignore ns and list across namespaces */
} asb_list_options;

#define ASB_LIST_OPTIONS_VERSION 1
/* clang-format off */
#define ASB_LIST_OPTIONS_INIT {ASB_LIST_OPTIONS_VERSION, NULL, NULL, 0}
/* clang-format on */

/* Lists objects: *out is the `<Kind>List` (with `items` and `metadata.resourceVersion`).
 * opts may be NULL. */
ASB_PUBLIC int asb_object_list(char **out, asb_client *client, const char *kind, const char *ns,
                               const asb_list_options *opts);

/* Creates an object from JSON text; *out is the stored object (uid, resourceVersion, ...). */
ASB_PUBLIC int asb_object_create(char **out, asb_client *client, const char *kind, const char *ns,
                                 const char *object_json);

/* Replaces an object (PUT). The JSON must carry metadata.name and metadata.resourceVersion;
 * a stale resourceVersion gives ASB_ECONFLICT. */
ASB_PUBLIC int asb_object_update(char **out, asb_client *client, const char *kind, const char *ns,
                                 const char *object_json);

/* JSON merge-patch (RFC 7386) of an object, or of its status subresource when `status` is
 * non-zero. */
ASB_PUBLIC int asb_object_patch(char **out, asb_client *client, const char *kind, const char *ns,
                                const char *name, const char *merge_patch_json, int status);

/* The kinds of patch asb_object_patch_typed() sends (the request's Content-Type). */
typedef enum asb_patch_type {
    ASB_PATCH_MERGE = 0,     /* application/merge-patch+json (RFC 7386) */
    ASB_PATCH_JSON = 1,      /* application/json-patch+json (RFC 6902) */
    ASB_PATCH_STRATEGIC = 2, /* application/strategic-merge-patch+json: kube-apiserver refuses
                                it for custom resources (415, ASB_EBADREQUEST), as asb serve does */
} asb_patch_type;

typedef struct asb_patch_options {
    unsigned int version;    /* ASB_PATCH_OPTIONS_VERSION */
    int type;                /* asb_patch_type */
    const char *subresource; /* "status", "scale" or NULL (the object itself) */
} asb_patch_options;

#define ASB_PATCH_OPTIONS_VERSION 1
/* clang-format off */
#define ASB_PATCH_OPTIONS_INIT {ASB_PATCH_OPTIONS_VERSION, ASB_PATCH_MERGE, NULL}
/* clang-format on */

/* Patches an object (or its subresource) with a patch of opts->type (opts NULL: a merge patch of
 * the object). *out is the server's reply: the patched object, or the autoscaling/v1 Scale for
 * "scale". */
ASB_PUBLIC int asb_object_patch_typed(char **out, asb_client *client, const char *kind,
                                      const char *ns, const char *name, const char *patch,
                                      const asb_patch_options *opts);

/* The server's discovery document: the APIGroupList (/apis) when group_version is NULL, else the
 * APIResourceList of "GROUP/VERSION" (/apis/GROUP/VERSION). *out owned (asb_free). */
ASB_PUBLIC int asb_server_discovery(char **out, asb_client *client, const char *group_version);

/* Deletes an object; *out is what the server returned (the object, or a Status). */
ASB_PUBLIC int asb_object_delete(char **out, asb_client *client, const char *kind, const char *ns,
                                 const char *name);

/* One watch event. type is "ADDED", "MODIFIED", "DELETED" or "BOOKMARK"; object_json is the
 * object (borrowed, valid during the call). Return 0 to go on; any other value ends the watch
 * and becomes asb_object_watch()'s return value. */
typedef int (*asb_watch_cb)(const char *type, const char *object_json, void *payload);

typedef struct asb_watch_options {
    unsigned int version;         /* ASB_WATCH_OPTIONS_VERSION */
    const char *name;             /* watch one object (field selector metadata.name) or NULL */
    const char *label_selector;   /* NULL: everything */
    const char *resource_version; /* start after this version; NULL: current state as ADDED
                                     events first, then changes */
    long timeout_ms;              /* end the watch after this long; 0: no limit */
    int allow_bookmarks;          /* deliver BOOKMARK events */
    const volatile int *cancel;   /* when *cancel becomes non-zero (any thread) the watch ends with
                                     ASB_ECANCELLED within about a second; may be NULL */
} asb_watch_options;

#define ASB_WATCH_OPTIONS_VERSION 1
/* clang-format off */
#define ASB_WATCH_OPTIONS_INIT {ASB_WATCH_OPTIONS_VERSION, NULL, NULL, NULL, 0, 0, NULL}
/* clang-format on */

/* Watches objects of a kind in ns, calling cb for each event as it arrives. Returns when the
 * callback returns non-zero (that value), ASB_OK when the server ends the stream, ASB_ETIMEOUT
 * when timeout_ms passes, ASB_ECANCELLED, ASB_EEXPIRED when resource_version is too old (relist
 * and watch again), or another error. */
ASB_PUBLIC int asb_object_watch(asb_client *client, const char *kind, const char *ns,
                                const asb_watch_options *opts, asb_watch_cb cb, void *payload);

typedef struct asb_wait_options {
    unsigned int version;       /* ASB_WAIT_OPTIONS_VERSION */
    long timeout_ms;            /* 0: wait forever (until cancelled) */
    const volatile int *cancel; /* as in asb_watch_options */
} asb_wait_options;

#define ASB_WAIT_OPTIONS_VERSION 1
/* clang-format off */
#define ASB_WAIT_OPTIONS_INIT {ASB_WAIT_OPTIONS_VERSION, 0, NULL}
/* clang-format on */

/* Waits until the object's status.conditions has `condition` (type, compared case-insensitively)
 * with status `status` (NULL: "True"). Built on watch: it returns as soon as the change is
 * committed, with no polling interval. *out is the object that satisfied it (may be NULL).
 * Returns ASB_OK, ASB_ETIMEOUT, ASB_ECANCELLED, ASB_ENOTFOUND (the object does not exist or is
 * deleted while waiting), or another error. */
ASB_PUBLIC int asb_object_wait_condition(char **out, asb_client *client, const char *kind,
                                         const char *ns, const char *name, const char *condition,
                                         const char *status, const asb_wait_options *opts);

/* Waits until the value at `path`, a simple JSONPath as kubectl's `wait --for=jsonpath` takes it
 * ("{.status.readyReplicas}": dotted keys and [N] indices, braces optional), exists and, when
 * `value` is not NULL, prints as `value` (strings as they are, numbers in decimal, booleans as
 * true/false). Built on watch like asb_object_wait_condition, with the same results. */
ASB_PUBLIC int asb_object_wait_jsonpath(char **out, asb_client *client, const char *kind,
                                        const char *ns, const char *name, const char *path,
                                        const char *value, const asb_wait_options *opts);

/* Waits until the object is gone (ASB_OK at once when it does not exist). */
ASB_PUBLIC int asb_object_wait_deleted(asb_client *client, const char *kind, const char *ns,
                                       const char *name, const asb_wait_options *opts);

#ifdef __cplusplus
}
#endif
#endif
