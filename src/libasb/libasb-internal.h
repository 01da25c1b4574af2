/* libasb internals shared by the files of src/libasb (hidden: nothing here is exported). */
#pragma once

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "asb/asb.h"

/* Records the thread's last error and returns `code`. reason may be NULL. */
int asbi_error_set(int code, int http_status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Maps an HTTP status and a Status reason to an asb_error_code (reason wins when known). */
int asbi_error_from_status(int http_status, const char *reason);
/* Sets the last error from a non-2xx reply body (a Status object, or text). Returns the code. */
int asbi_error_from_reply(int http_status, const char *body, size_t len);

struct api_error;
/* The public boundary for an internal failure (docs/architecture.md, "How code fails"): err is a
 * negative errno (from src/basic, src/shared, libc, or libasb's own helpers), never an
 * asb_error_code; e (may be NULL) carries its words. Records asb_error_last() (e's message, else
 * "out of memory" for -ENOMEM, else strerror) and returns the asb_error_code err stands for:
 * ENOMEM ASB_ENOMEM, EINVAL ASB_EINVAL, EACCES/EPERM ASB_EFORBIDDEN, ENOENT ASB_ENOTFOUND,
 * EEXIST ASB_EEXISTS, ETIMEDOUT ASB_ETIMEOUT, ECANCELED ASB_ECANCELLED, connection errnos
 * ASB_ECONNECT, EPROTO/EBADMSG ASB_EPROTOCOL, anything else ASB_ERROR. err >= 0: ASB_OK, nothing
 * recorded. */
int asbi_error_from(int err, const struct api_error *e);

/* YAML/JSON manifest text -> JSON array of objects (new reference) or NULL with the error set. */
json_t *asbi_manifest_load(const char *data, size_t len);
/* JSON value -> YAML text, owned by the caller; NULL on ENOMEM/invalid with the error set. */
char *asbi_yaml_dump(const json_t *v);

/* Lowercase-insensitive compare helper for kind names. */
const asb_kind *asbi_kind_find(const char *name);

#include "libasb/libasb-curl.h"

struct asb_client {
    CURL *curl;    /* the curl transport's handle, made on its first use; NULL before */
    char *server;  /* no trailing slash */
    char *token;   /* may be NULL */
    char *noproxy; /* $NO_PROXY plus the loopback names */
    char *state_dir; /* the state directory the client was configured from */
    bool state_dirs_server; /* server is the one of state_dir/server (its sandboxes are local) */
    long timeout_ms, connect_timeout_ms;
    asb_log_cb log_cb;
    void *log_payload;
    asb_warning_cb warning_cb;
    void *warning_payload;
    char *field_validation; /* NULL: not sent */
    bool dry_run;           /* writes carry dryRun=All */
    char curl_detail[CURL_ERROR_SIZE]; /* libcurl's CURLOPT_ERRORBUFFER */
};

void asbi_log(asb_client *c, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* asb_object_create of a SandboxClaim that also returns the reply's Asb-Claim-Sandbox header
 * (shared/claim-header.h; owned, NULL when there was none). */
int asbi_object_create_claim(char **out, char **ret_claim_sandbox, asb_client *c, const char *ns,
                             const char *object_json);

/* asb_object_get() parsed: *ret is the object, owned by the caller (json_decref). Returns ASB_OK,
 * asb_object_get()'s error, or ASB_EPROTOCOL (set) when the reply is not JSON. */
int asbi_object_get_json(json_t **ret, asb_client *c, const char *kind, const char *ns,
                         const char *name);

/* "/apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>[/<sub>]]"; ns NULL: cluster-wide.
 * Owned by the caller, NULL on ENOMEM (error set). */
char *asbi_path(asb_client *c, const asb_kind *k, const char *ns, const char *name,
                const char *sub);

/* The request headers every call sends (Accept, Authorization when there is a token, and
 * Content-Type when content_type is not NULL) into lines[0..*ret_n), each owned by the caller
 * (asbi_headers_free). Returns ASB_OK or ASB_ENOMEM (set). */
#define ASBI_MAX_HEADERS 4
int asbi_headers(const asb_client *c, const char *content_type, char *lines[ASBI_MAX_HEADERS],
                 size_t *ret_n);
void asbi_headers_free(char *lines[ASBI_MAX_HEADERS], size_t n);

/* Internal watch: events as parsed JSON (object borrowed during the call). */
typedef int (*asbi_event_cb)(const char *type, json_t *object, void *payload);

typedef struct asbi_watch_params {
    const char *name;
    const char *label_selector;
    const char *resource_version;
    long timeout_ms; /* 0: none */
    int allow_bookmarks;
    const volatile int *cancel;
} asbi_watch_params;

int asbi_watch(asb_client *c, const asb_kind *k, const char *ns, const asbi_watch_params *p,
               asbi_event_cb cb, void *payload);

/* asb_object_wait_condition() with a predicate of the caller's: returns as soon as pred(object,
 * payload) is true for the object as read or as a watch event delivers it (*out: that object,
 * owned by the caller). Same results as asb_object_wait_condition(). */
typedef bool (*asbi_wait_pred)(const json_t *obj, void *payload);
int asbi_object_wait_until(char **out, asb_client *c, const char *kind, const char *ns,
                           const char *name, asbi_wait_pred pred, void *payload,
                           const asb_wait_options *opts);

/* Whether obj has status.conditions[type == condition (any case)].status == status (any case),
 * not outdated by observedGeneration < metadata.generation. */
int asbi_condition_met(const json_t *obj, const char *condition, const char *status);
/* obj's status condition of that type (any case), borrowed, or NULL. */
const json_t *asbi_find_condition(const json_t *obj, const char *type);
