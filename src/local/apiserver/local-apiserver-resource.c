/* Resource verbs: get, list, create (generateName), update (optimistic concurrency), merge-patch
 * and JSON patch, delete and deletecollection, on objects and their /status subresource. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "api/api-pod.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "basic/random-util.h"
#include "local/apiserver/local-apiserver-internal.h"
#include "shared/log.h"

#define GENERATE_NAME_TRIES 8

static void format_now(char out[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *json_decref_null(json_t *j)
{
    json_decref(j);
    return NULL;
}

static bool same(const json_t *a, const json_t *b)
{
    if (!a || !b)
        return a == b;
    return json_equal((json_t *)a, (json_t *)b);
}

/* ---- Status builders (all return owned references) ---- */

static json_t *status_conflict(const api_kind *k, const char *name)
{
    char msg[600];
    snprintf(msg, sizeof(msg),
             "Operation cannot be fulfilled on %s.%s \"%s\": the object has been modified; please "
             "apply your changes to the latest version and try again",
             k->plural, k->group, name);
    return status_failure(KUBE_REASON_CONFLICT, msg, k, name);
}

static json_t *status_bad_request(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *status_bad_request(const char *fmt, ...)
{
    _cleanup_free_ char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    return status_failure(KUBE_REASON_BAD_REQUEST, msg, NULL, NULL);
}

static json_t *status_invalid(const api_kind *k, const char *name, const api_errors *errs)
{
    _cleanup_free_ char *msg = api_errors_format(errs, k, name);
    json_t *st = status_failure(KUBE_REASON_INVALID, msg, k, name);
    json_t *d = json_object_get(st, "details");
    if (d) {
        json_object_set_new(d, "kind", json_string(k->kind));
        json_object_set_new(d, "causes", api_errors_causes(errs));
    }
    return st;
}

/* A store errno as kube-apiserver words it: NotFound, AlreadyExists, else InternalError. */
static enum MHD_Result reply_store_error(api_request *rq, int r, const char *name)
{
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    const api_kind *k = rq->kind;
    switch (kube_reason_from_errno(r)) {
    case KUBE_REASON_NOT_FOUND:
        api_error_set_errno(&e, r, "%s.%s \"%s\" not found", k->plural, k->group, name);
        break;
    case KUBE_REASON_ALREADY_EXISTS:
        api_error_set_errno(&e, r, "%s.%s \"%s\" already exists", k->plural, k->group, name);
        break;
    default:
        api_error_set_reason(&e, KUBE_REASON_INTERNAL_ERROR, "Internal error occurred: %s",
                             strerror(-r));
    }
    return reply_api_error(rq->conn, &e, k, name);
}

/* A request refused as a BadRequest: -EINVAL with err set. */
#define bad_request(err, ...) api_error_set_reason(err, KUBE_REASON_BAD_REQUEST, __VA_ARGS__)

/* Parses the request body as a JSON value into *ret (owned); -EINVAL with err set when it is
 * not one (or not an object when want_object), -ENOMEM. */
static int parse_body(api_request *rq, bool want_object, json_t **ret, api_error *err)
{
    if (rq->body_len == 0) {
        return bad_request(err, "the request body is empty");
    }
    /* Before the parser, whose recursion would otherwise follow the body's nesting. */
    if (api_json_text_deeper_than(rq->body, rq->body_len, API_MAX_DEPTH)) {
        return bad_request(err, "the request body nests objects and arrays deeper than %d levels",
                           API_MAX_DEPTH);
    }
    json_error_t jerr;
    json_t *j = json_loadb(rq->body, rq->body_len, JSON_DECODE_ANY, &jerr);
    if (!j)
        return bad_request(err, "the request body is not valid JSON: %s (line %d, column %d)",
                           jerr.text, jerr.line, jerr.column);
    if (want_object && !json_is_object(j)) {
        json_decref(j);
        return bad_request(err, "the request body must be a JSON object");
    }
    *ret = j;
    return 0;
}

/* apiVersion/kind must match the URL; missing ones are filled in. Metadata must be an object and
 * its namespace must match. -EINVAL with err set on failure. */
static int check_type_meta(api_request *rq, json_t *obj, api_error *err)
{
    const api_kind *k = rq->kind;
    json_t *av = json_object_get(obj, "apiVersion"), *kd = json_object_get(obj, "kind");
    if (av && (!json_is_string(av) || strcmp(json_string_value(av), k->api_version) != 0))
        return bad_request(
            err, "the API version in the data (%s) does not match the expected API version (%s)",
            json_is_string(av) ? json_string_value(av) : "?", k->api_version);
    if (kd && (!json_is_string(kd) || strcmp(json_string_value(kd), k->kind) != 0))
        return bad_request(err, "the kind in the data (%s) does not match the expected kind (%s)",
                           json_is_string(kd) ? json_string_value(kd) : "?", k->kind);
    json_object_set_new(obj, "apiVersion", json_string(k->api_version));
    json_object_set_new(obj, "kind", json_string(k->kind));
    json_t *md = json_object_get(obj, "metadata");
    if (!md) {
        md = json_object();
        json_object_set_new(obj, "metadata", md);
    }
    if (!json_is_object(md))
        return bad_request(err, "metadata must be a JSON object");
    json_t *ns = json_object_get(md, "namespace");
    if (ns && !(json_is_string(ns) && json_string_length(ns) == 0) &&
        (!json_is_string(ns) || strcmp(json_string_value(ns), rq->ns) != 0))
        return bad_request(err, "the namespace of the provided object does not match the "
                                "namespace sent on the request");
    json_object_set_new(md, "namespace", json_string(rq->ns));
    if (rq->name) {
        json_t *name = json_object_get(md, "name");
        if (name && (!json_is_string(name) || strcmp(json_string_value(name), rq->name) != 0))
            return bad_request(err,
                               "the name of the object (%s) does not match the name on the "
                               "URL (%s)",
                               json_is_string(name) ? json_string_value(name) : "?", rq->name);
        json_object_set_new(md, "name", json_string(rq->name));
    }
    return 0;
}

static void strip_server_fields(json_t *md)
{
    static const char *const fields[] = {"uid",
                                         "resourceVersion",
                                         "creationTimestamp",
                                         "generation",
                                         "deletionTimestamp",
                                         "selfLink",
                                         "deletionGracePeriodSeconds"};
    for (size_t i = 0; i < ELEMENTSOF(fields); i++)
        json_object_del(md, fields[i]);
}

/* `dryRun=All` runs every check and returns the result without storing anything. Returns
 * -EINVAL on a bad value (the reply is queued through *ret). */
static int dry_run(api_request *rq, enum MHD_Result *ret)
{
    const char *v = query(rq->conn, "dryRun");
    if (!v || !*v)
        return 0;
    if (strcmp(v, "All") == 0)
        return 1;
    *ret = reply_status(rq->conn, KUBE_REASON_BAD_REQUEST, NULL, NULL,
                        "Invalid dry run value \"%s\": supported values: \"All\"", v);
    return -EINVAL;
}

/* `fieldValidation` of create, update and patch, as kube-apiserver: Warn (the default) drops the
 * fields the kind does not declare and says so in Warning headers, Ignore drops them silently,
 * Strict refuses the request. */
typedef enum field_validation {
    FIELD_VALIDATION_WARN,
    FIELD_VALIDATION_IGNORE,
    FIELD_VALIDATION_STRICT,
} field_validation;

/* Returns -EINVAL on a bad value (the reply is queued through *ret); options_kind names the options
 * type in the error ("CreateOptions", "UpdateOptions", "PatchOptions"). */
static int field_validation_mode(api_request *rq, const char *options_kind, field_validation *mode,
                                 enum MHD_Result *ret)
{
    const char *v = query(rq->conn, "fieldValidation");
    *mode = FIELD_VALIDATION_WARN;
    if (!v || !*v || strcmp(v, "Warn") == 0)
        return 0;
    if (strcmp(v, "Ignore") == 0) {
        *mode = FIELD_VALIDATION_IGNORE;
        return 0;
    }
    if (strcmp(v, "Strict") == 0) {
        *mode = FIELD_VALIDATION_STRICT;
        return 0;
    }
    json_t *value = json_string(v);
    api_errors errs = {0};
    api_errors_add(&errs, API_FIELD_UNSUPPORTED, "fieldValidation", value,
                   "supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
    json_decref(value);
    _cleanup_free_ char *msg = NULL;
    if (asprintf(&msg, "%s.meta.k8s.io \"\" is invalid: %s", options_kind,
                 errs.n ? errs.v[0].message : "") < 0)
        msg = NULL;
    json_t *st = status_failure(KUBE_REASON_INVALID, msg, NULL, NULL);
    json_t *d = json_pack("{s:s,s:s,s:s,s:o}", "name", "", "group", "meta.k8s.io", "kind",
                          options_kind, "causes", api_errors_causes(&errs));
    api_errors_clear(&errs);
    if (st && d)
        json_object_set_new(st, "details", d);
    else
        json_decref(d);
    *ret = reply_failure(rq->conn, st);
    return -EINVAL;
}

/* Prunes the fields k does not declare from obj. Strict with unknown fields: -EINVAL with err
 * the 400 BadRequest to answer with (every unknown field in one message, as kube-apiserver's
 * strict decoding error). Warn: *ret_warnings gets `unknown field "PATH"` texts (owned, may be
 * NULL). */
static int check_unknown_fields(const api_kind *k, json_t *obj, field_validation mode,
                                json_t **ret_warnings, api_error *err)
{
    *ret_warnings = NULL;
    _cleanup_json_ json_t *paths = NULL;
    if (api_prune_unknown(k, obj, &paths) < 0)
        return api_error_set_reason(err, KUBE_REASON_INTERNAL_ERROR, "out of memory");
    if (json_array_size(paths) == 0 || mode == FIELD_VALIDATION_IGNORE)
        return 0;
    _cleanup_json_ json_t *texts = json_array();
    if (!texts)
        return api_error_set_reason(err, KUBE_REASON_INTERNAL_ERROR, "out of memory");
    size_t i;
    json_t *p;
    json_array_foreach (paths, i, p) {
        char *t = NULL;
        if (asprintf(&t, "unknown field \"%s\"", json_string_value(p)) >= 0) {
            json_array_append_new(texts, json_string(t));
            free(t);
        }
    }
    if (mode == FIELD_VALIDATION_WARN) {
        *ret_warnings = TAKE_PTR(texts);
        return 0;
    }
    _cleanup_buf_ buf msg = BUF_INIT;
    int r = buf_appendf(
        &msg, "%s in version \"%s\" cannot be handled as a %s: strict decoding error: ", k->kind,
        API_VERSION, k->kind);
    json_array_foreach (texts, i, p)
        if (r >= 0)
            r = buf_appendf(&msg, "%s%s", i ? ", " : "", json_string_value(p));
    if (r < 0)
        return api_error_set_reason(err, KUBE_REASON_INTERNAL_ERROR, "out of memory");
    api_error_set_reason(err, KUBE_REASON_BAD_REQUEST, "%s", msg.data);
    return -EINVAL;
}

static bool has_finalizers(const json_t *obj)
{
    return json_array_size(json_object_get(json_object_get(obj, "metadata"), "finalizers")) > 0;
}

static bool being_deleted(const json_t *obj)
{
    return json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp") != NULL;
}

/* autoscaling/v1 Scale view of an object with a scale subresource. Owned. */
static json_t *to_scale(const json_t *obj)
{
    const json_t *md = json_object_get(obj, "metadata");
    const json_t *status = json_object_get(obj, "status");
    json_t *smd = json_object();
    static const char *const keep[] = {"name", "namespace", "uid", "resourceVersion",
                                       "creationTimestamp"};
    for (size_t i = 0; i < ELEMENTSOF(keep); i++) {
        json_t *v = json_object_get(md, keep[i]);
        if (v)
            json_object_set(smd, keep[i], v);
    }
    json_t *st =
        json_pack("{s:I}", "replicas", json_integer_value(json_object_get(status, "replicas")));
    json_t *sel = json_object_get(status, "selector");
    if (json_is_string(sel))
        json_object_set(st, "selector", sel);
    return json_pack("{s:s,s:s,s:o,s:{s:I},s:o}", "kind", "Scale", "apiVersion", "autoscaling/v1",
                     "metadata", smd, "spec", "replicas",
                     json_integer_value(json_object_get(json_object_get(obj, "spec"), "replicas")),
                     "status", st);
}

/* ---- create ---- */

/* The store's create, plus what the kind's create hook writes in the same transaction; the
 * hook's answer for the client (*ret_header: its name, *ret_value: owned), if any. */
static int store_create(api_request *rq, const api_kind *k, json_t *obj, const char **ret_header,
                        char **ret_value)
{
    local_apiserver *srv = rq->srv;
    *ret_header = NULL;
    *ret_value = NULL;
    pthread_rwlock_rdlock(&srv->hook_lock);
    void *plan = srv->hook.prepare && srv->hook_kind == k
                     ? srv->hook.prepare(srv->hook_data, obj)
                     : NULL;
    if (!plan) {
        pthread_rwlock_unlock(&srv->hook_lock);
        return local_store_create(srv->store, k, obj);
    }
    bool batched = local_store_batch_begin(srv->store) == 0;
    int r = local_store_create(srv->store, k, obj);
    char *value = NULL;
    if (r == 0 && batched) {
        if (srv->hook.commit(srv->hook_data, TAKE_PTR(plan), &value) <= 0) {
            free(value);
            value = NULL;
        }
    } else
        srv->hook.discard(srv->hook_data, TAKE_PTR(plan));
    if (batched) {
        int e = local_store_batch_end(srv->store);
        if (e < 0 && r == 0)
            r = e; /* none of it happened */
    }
    if (r == 0 && value) {
        *ret_header = srv->hook_header;
        *ret_value = value;
    } else
        free(value);
    pthread_rwlock_unlock(&srv->hook_lock);
    return r;
}

/* Warnings beyond the schema's: a pod spec asking for more than this machine has. Reads the pod
 * validation parsed (errs->pod; none when it did not parse, and validation has said why). */
static int admission_warnings(const local_apiserver *srv, const api_kind *k, api_errors *errs,
                              json_t **warnings)
{
    _cleanup_(api_pod_freep) api_pod *pod = api_errors_take_pod(errs);
    if (!srv->has_capacity || !pod ||
        (strcmp(k->kind, "Sandbox") != 0 && strcmp(k->kind, "SandboxTemplate") != 0))
        return 0;
    return local_capacity_warnings(&srv->capacity, pod, "spec.podTemplate.spec", warnings);
}

static enum MHD_Result handle_create(api_request *rq)
{
    const api_kind *k = rq->kind;
    enum MHD_Result dret = MHD_NO;
    int dry = dry_run(rq, &dret);
    if (dry < 0)
        return dret;
    field_validation fv;
    if (field_validation_mode(rq, "CreateOptions", &fv, &dret) < 0)
        return dret;
    _cleanup_json_ json_t *obj = NULL;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    if (parse_body(rq, true, &obj, &err) < 0 || check_type_meta(rq, obj, &err) < 0)
        return reply_api_error(rq->conn, &err, NULL, NULL);
    _cleanup_json_ json_t *warnings = NULL;
    if (check_unknown_fields(k, obj, fv, &warnings, &err) < 0)
        return reply_api_error(rq->conn, &err, NULL, NULL);
    json_t *md = json_object_get(obj, "metadata");
    strip_server_fields(md);
    if (k->has_status)
        json_object_del(obj, "status");
    json_t *gn = json_object_get(md, "generateName");
    json_t *name = json_object_get(md, "name");
    bool generate = (!name || (json_is_string(name) && json_string_length(name) == 0)) &&
                    json_is_string(gn) && json_string_length(gn) > 0;
    api_default(k, obj);

    char uid[37], now[32];
    const char *hook_header = NULL;
    _cleanup_free_ char *hook_value = NULL;
    int r = uuid_v4(uid);
    if (r < 0)
        return reply_store_error(rq, r, "");
    format_now(now);
    for (unsigned attempt = 0;; attempt++) {
        if (generate) {
            unsigned char rnd[5];
            if (random_bytes(rnd, sizeof(rnd)) < 0)
                return reply_store_error(rq, -EIO, "");
            char *n = api_generate_name(json_string_value(gn), rnd);
            if (!n)
                return MHD_NO;
            json_object_set_new(md, "name", json_string(n));
            free(n);
        }
        api_errors errs = {0};
        api_validate(k, obj, NULL, &errs);
        if (errs.n > 0) {
            json_t *inv = status_invalid(k, api_meta_string(obj, "name"), &errs);
            api_errors_clear(&errs);
            return reply_failure_warnings(rq->conn, inv, warnings);
        }
        if (attempt == 0 && admission_warnings(rq->srv, k, &errs, &warnings) < 0) {
            api_errors_clear(&errs);
            return reply_store_error(rq, -ENOMEM, "");
        }
        api_errors_clear(&errs);
        if (apiserver_snapshot_admit_create(rq, obj, &err) < 0)
            return reply_api_error(rq->conn, &err, k, api_meta_string(obj, "name"));
        json_object_set_new(md, "uid", json_string(uid));
        json_object_set_new(md, "creationTimestamp", json_string(now));
        json_object_set_new(md, "generation", json_integer(1));
        if (dry)
            return reply_json_warnings(rq->conn, 201, json_incref(obj), warnings);
        r = store_create(rq, k, obj, &hook_header, &hook_value); /* a value only with r == 0 */
        if (r == -EEXIST && generate && attempt + 1 < GENERATE_NAME_TRIES)
            continue;
        break;
    }
    if (r < 0)
        return reply_store_error(rq, r, api_meta_string(obj, "name"));
    return reply_json_headers(rq->conn, 201, json_incref(obj), warnings, hook_header, hook_value);
}

/* ---- update / patch ---- */

typedef enum patch_type { PATCH_NONE, PATCH_MERGE, PATCH_JSON } patch_type;

typedef struct update_ctx {
    api_request *rq;
    json_t *body; /* PUT: the object; PATCH: the patch document; DELETE: DeleteOptions or NULL */
    patch_type patch;
    bool dry_run;
    json_t *dry_result; /* what would have been stored */
    json_t *error;      /* Status to answer with when the callback returns -EPROTO */
    field_validation field_validation;
    json_t *warnings; /* unknown-field warnings of the last attempt (owned) */
} update_ctx;

static int fail_with(update_ctx *u, json_t *status)
{
    u->error = status;
    return -EPROTO;
}

/* Generation bumps when the spec changes; for kinds without a status subresource any change
 * outside metadata counts, as kube-apiserver does for custom resources. */
static bool spec_changed(const api_kind *k, const json_t *old, const json_t *new)
{
    if (k->has_status)
        return !same(json_object_get(old, "spec"), json_object_get(new, "spec"));
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)new, key, v) {
        if (strcmp(key, "metadata") != 0 && !same(v, json_object_get(old, key)))
            return true;
    }
    json_object_foreach ((json_t *)old, key, v) {
        if (strcmp(key, "metadata") != 0 && !json_object_get(new, key))
            return true;
    }
    return false;
}

static void copy_field(json_t *dst, const json_t *src, const char *key)
{
    json_t *v = json_object_get(src, key);
    if (v)
        json_object_set(dst, key, v);
    else
        json_object_del(dst, key);
}

static int finish_update(update_ctx *u, const json_t *old, json_t *new, json_t **ret_new);

/* /scale: only spec.replicas of the object changes; a resourceVersion in the Scale is a
 * precondition. */
static int build_scale_update(update_ctx *u, const json_t *old, const json_t *scale,
                              json_t **ret_new)
{
    api_request *rq = u->rq;
    json_t *rv = json_object_get(json_object_get(scale, "metadata"), "resourceVersion");
    if (rv && !(json_is_string(rv) && json_string_length(rv) == 0) &&
        !same(rv, json_object_get(json_object_get(old, "metadata"), "resourceVersion")))
        return fail_with(u, status_conflict(rq->kind, rq->name));
    json_t *replicas = json_object_get(json_object_get(scale, "spec"), "replicas");
    if (!json_is_integer(replicas) || json_integer_value(replicas) < 0) {
        api_errors errs = {0};
        api_errors_add(&errs, API_FIELD_INVALID, "spec.replicas", replicas,
                       "must be greater than or equal to 0");
        json_t *inv = status_invalid(rq->kind, rq->name, &errs);
        api_errors_clear(&errs);
        return fail_with(u, inv);
    }
    json_t *new = json_deep_copy(old);
    json_t *spec = json_object_get(new, "spec");
    if (!new || !json_is_object(spec)) {
        json_decref(new);
        return -ENOMEM;
    }
    json_object_set(spec, "replicas", replicas);
    return finish_update(u, old, new, ret_new);
}

static int build_update(update_ctx *u, const json_t *old, json_t **ret_new)
{
    api_request *rq = u->rq;
    const api_kind *k = rq->kind;
    _cleanup_json_ json_t *cand = NULL, *scale_old = NULL;
    if (rq->scale) {
        scale_old = to_scale(old);
        if (!scale_old)
            return -ENOMEM;
    }
    const json_t *base = scale_old ? scale_old : old;
    if (u->patch == PATCH_MERGE) {
        cand = api_merge_patch(base, u->body);
    } else if (u->patch == PATCH_JSON) {
        _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
        if (api_json_patch(base, u->body, &cand, &err) < 0)
            return err.message
                       ? fail_with(u, status_failure(KUBE_REASON_INVALID, err.message, k, rq->name))
                       : -ENOMEM;
    } else {
        cand = json_deep_copy(u->body);
    }
    if (!cand)
        return -ENOMEM;
    if (!json_is_object(cand))
        return fail_with(u, status_bad_request("the patched object is not a JSON object"));
    if (rq->scale)
        return build_scale_update(u, old, cand, ret_new);
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    if (check_type_meta(rq, cand, &err) < 0)
        return fail_with(u, status_failure(api_error_reason(&err), err.message, NULL, NULL));
    /* The object as decoded (after the patch, as kube-apiserver decodes the patched object). */
    u->warnings = json_decref_null(u->warnings);
    if (check_unknown_fields(k, cand, u->field_validation, &u->warnings, &err) < 0)
        return fail_with(u, status_failure(api_error_reason(&err), err.message, NULL, NULL));
    json_t *cmd = json_object_get(cand, "metadata");
    const json_t *omd = json_object_get(old, "metadata");
    json_t *rv = json_object_get(cmd, "resourceVersion");
    bool rv_given = rv && !(json_is_string(rv) && json_string_length(rv) == 0);
    if (!rv_given && u->patch == PATCH_NONE) {
        api_errors errs = {0};
        json_t *zero = json_integer(0);
        api_errors_add(&errs, API_FIELD_INVALID, "metadata.resourceVersion", zero,
                       "must be specified for an update");
        json_decref(zero);
        json_t *inv = status_invalid(k, rq->name, &errs);
        api_errors_clear(&errs);
        return fail_with(u, inv);
    }
    if (rv_given && !same(rv, json_object_get(omd, "resourceVersion")))
        return fail_with(u, status_conflict(k, rq->name));

    _cleanup_json_ json_t *new = NULL;
    if (rq->status) {
        new = json_deep_copy(old);
        if (!new)
            return -ENOMEM;
        copy_field(new, cand, "status");
    } else {
        new = json_incref(cand);
        if (k->has_status)
            copy_field(new, old, "status");
        static const char *const kept[] = {"uid",
                                           "creationTimestamp",
                                           "generation",
                                           "resourceVersion",
                                           "deletionTimestamp",
                                           "deletionGracePeriodSeconds"};
        for (size_t i = 0; i < ELEMENTSOF(kept); i++)
            copy_field(cmd, omd, kept[i]);
        json_object_del(cmd, "generateName");
        copy_field(cmd, omd, "generateName");
    }
    return finish_update(u, old, TAKE_PTR(new), ret_new);
}

/* Defaults, validation, generation, finalizer rules and dry run for a candidate new object
 * (reference stolen). */
static int finish_update(update_ctx *u, const json_t *old, json_t *new_ref, json_t **ret_new)
{
    api_request *rq = u->rq;
    const api_kind *k = rq->kind;
    const json_t *omd = json_object_get(old, "metadata");
    _cleanup_json_ json_t *new = new_ref;
    api_default(k, new);
    api_errors errs = {0};
    api_validate(k, new, old, &errs);
    api_errors_ratchet(&errs, new, old);
    if (errs.n > 0) {
        json_t *inv = status_invalid(k, rq->name, &errs);
        api_errors_clear(&errs);
        return fail_with(u, inv);
    }
    int w = rq->status ? 0 : admission_warnings(rq->srv, k, &errs, &u->warnings);
    api_errors_clear(&errs); /* every error ratcheted away: the list itself */
    if (w < 0)
        return -ENOMEM;
    if (!rq->status && spec_changed(k, old, new)) {
        json_int_t gen = json_integer_value(json_object_get(omd, "generation"));
        json_object_set_new(json_object_get(new, "metadata"), "generation", json_integer(gen + 1));
    }
    if (same(old, new))
        return STORE_UPDATE_UNCHANGED;
    int result = 0;
    if (being_deleted(old)) {
        /* Terminating: finalizers may only be removed; the last one going deletes the object. */
        json_t *of = json_object_get(omd, "finalizers");
        json_t *nf = json_object_get(json_object_get(new, "metadata"), "finalizers");
        size_t i;
        json_t *f;
        json_array_foreach (nf, i, f) {
            bool known = false;
            size_t j;
            json_t *g;
            json_array_foreach (of, j, g) {
                known = known || json_equal(f, g);
            }
            if (!known) {
                json_t *st2 = status_failure(
                    KUBE_REASON_INVALID,
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the "
                    "object is being deleted",
                    k, rq->name);
                return fail_with(u, st2);
            }
        }
        if (!has_finalizers(new))
            result = STORE_UPDATE_DELETE;
    }
    if (u->dry_run) {
        u->dry_result = TAKE_PTR(new);
        return STORE_UPDATE_UNCHANGED;
    }
    *ret_new = TAKE_PTR(new);
    return result;
}

static int update_cb(const json_t *old, json_t **ret_new, void *payload)
{
    return build_update(payload, old, ret_new);
}

/* Runs one read-modify-write and answers with its result (or the dry-run result). */
static enum MHD_Result run_update(api_request *rq, update_ctx *u, store_update_fn fn)
{
    json_t *result = NULL;
    int r = local_store_update(rq->srv->store, rq->kind, rq->ns, rq->name, fn, u, &result);
    json_decref(u->body);
    if (r == -EPROTO) {
        enum MHD_Result ret = reply_failure_warnings(rq->conn, u->error, u->warnings);
        u->warnings = json_decref_null(u->warnings);
        return ret;
    }
    if (r < 0)
        u->warnings = json_decref_null(u->warnings);
    if (r < 0)
        return reply_store_error(rq, r, rq->name);
    if (u->dry_result) {
        json_decref(result);
        result = u->dry_result;
    }
    if (rq->scale) {
        json_t *sc = to_scale(result);
        json_decref(result);
        result = sc;
    }
    enum MHD_Result ret = reply_json_warnings(rq->conn, 200, result, u->warnings);
    u->warnings = json_decref_null(u->warnings);
    return ret;
}

static enum MHD_Result handle_update(api_request *rq, patch_type patch)
{
    enum MHD_Result dret = MHD_NO;
    int dry = dry_run(rq, &dret);
    if (dry < 0)
        return dret;
    update_ctx u = {.rq = rq, .patch = patch, .dry_run = dry};
    if (field_validation_mode(rq, patch == PATCH_NONE ? "UpdateOptions" : "PatchOptions",
                              &u.field_validation, &dret) < 0)
        return dret;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    if (parse_body(rq, patch != PATCH_JSON, &u.body, &err) < 0)
        return reply_api_error(rq->conn, &err, NULL, NULL);
    return run_update(rq, &u, update_cb);
}

/* DELETE: preconditions, then either gone at once or, with finalizers, marked with a
 * deletionTimestamp until the last finalizer is removed (kube's graceful deletion). */
static int delete_cb(const json_t *old, json_t **ret_new, void *payload)
{
    update_ctx *u = payload;
    const api_kind *k = u->rq->kind;
    const json_t *omd = json_object_get(old, "metadata");
    json_t *pre = json_object_get(u->body, "preconditions");
    static const char *const fields[] = {"uid", "resourceVersion"};
    for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
        json_t *want = json_object_get(pre, fields[i]);
        if (want && !json_is_null(want) && !same(want, json_object_get(omd, fields[i]))) {
            char msg[600];
            snprintf(msg, sizeof(msg),
                     "Operation cannot be fulfilled on %s.%s \"%s\": Precondition failed: %s in "
                     "precondition: %s, %s in object meta: %s",
                     k->plural, k->group, u->rq->name, fields[i],
                     json_is_string(want) ? json_string_value(want) : "?", fields[i],
                     api_meta_string(old, fields[i]) ? api_meta_string(old, fields[i]) : "");
            return fail_with(u, status_failure(KUBE_REASON_CONFLICT, msg, k, u->rq->name));
        }
    }
    json_t *new = NULL;
    int result = STORE_UPDATE_DELETE;
    if (has_finalizers(old)) {
        if (being_deleted(old))
            return STORE_UPDATE_UNCHANGED;
        new = json_deep_copy(old);
        if (!new)
            return -ENOMEM;
        char now[32];
        format_now(now);
        json_t *md = json_object_get(new, "metadata");
        json_object_set_new(md, "deletionTimestamp", json_string(now));
        json_object_set_new(md, "deletionGracePeriodSeconds", json_integer(0));
        json_object_set_new(
            md, "generation",
            json_integer(json_integer_value(json_object_get(omd, "generation")) + 1));
        result = 0;
    }
    if (u->dry_run) {
        u->dry_result = new ? new : json_deep_copy(old);
        return STORE_UPDATE_UNCHANGED;
    }
    *ret_new = new;
    return result;
}

static enum MHD_Result handle_delete(api_request *rq)
{
    enum MHD_Result dret = MHD_NO;
    int dry = dry_run(rq, &dret);
    if (dry < 0)
        return dret;
    _cleanup_(api_error_clearp) api_error refused = API_ERROR_INIT;
    if (apiserver_snapshot_admit_delete(rq, &refused) < 0)
        return reply_api_error(rq->conn, &refused, rq->kind, rq->name);
    update_ctx u = {.rq = rq, .dry_run = dry};
    if (rq->body_len > 0) {
        _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
        if (parse_body(rq, true, &u.body, &err) < 0)
            return reply_api_error(rq->conn, &err, NULL, NULL);
        const char *dr = json_string_value(json_array_get(json_object_get(u.body, "dryRun"), 0));
        if (dr && strcmp(dr, "All") == 0)
            u.dry_run = true;
    }
    return run_update(rq, &u, delete_cb);
}

static enum MHD_Result handle_patch(api_request *rq)
{
    const char *ct =
        MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    char type[128] = "";
    if (ct) {
        size_t n = strcspn(ct, ";");
        snprintf(type, sizeof(type), "%.*s", (int)MIN(n, sizeof(type) - 1), ct);
        while (n > 0 && type[n - 1] == ' ')
            type[--n] = '\0';
    }
    if (strcasecmp(type, "application/merge-patch+json") == 0)
        return handle_update(rq, PATCH_MERGE);
    if (strcasecmp(type, "application/json-patch+json") == 0)
        return handle_update(rq, PATCH_JSON);
    return reply_status(rq->conn, KUBE_REASON_UNSUPPORTED_MEDIA_TYPE, NULL, NULL,
                        "the body of the request was in an unknown format - accepted media types "
                        "include: application/json-patch+json, application/merge-patch+json");
}

/* ---- get / list / delete ---- */

/* -EINVAL with e set (a BadRequest) when a selector does not parse. */
static int parse_selectors(api_request *rq, api_selector **ls, api_selector **fs, api_error *e)
{
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    int r = api_label_selector_parse(query(rq->conn, "labelSelector"), ls, &err);
    if (r == -EINVAL)
        return bad_request(e, "unable to parse requirement: %s", err.message);
    if (r < 0)
        return r;
    r = api_field_selector_parse(query(rq->conn, "fieldSelector"), fs, &err);
    if (r == -EINVAL) {
        *ls = api_selector_free(*ls);
        return bad_request(e, "%s", err.message);
    }
    if (r < 0)
        *ls = api_selector_free(*ls);
    return r;
}

static bool selected(const api_selector *ls, const api_selector *fs, const json_t *obj)
{
    return api_label_selector_matches(
               ls, json_object_get(json_object_get(obj, "metadata"), "labels")) &&
           api_field_selector_matches(fs, obj);
}

/* Items of the collection (after selectors), with the list's resourceVersion. */
static enum MHD_Result collect(api_request *rq, json_t **ret_items, uint64_t *ret_rv)
{
    api_selector *ls = NULL, *fs = NULL;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    int r = parse_selectors(rq, &ls, &fs, &err);
    if (r == -EINVAL)
        return reply_api_error(rq->conn, &err, NULL, NULL);
    if (r < 0)
        return MHD_NO;
    json_t *all = NULL;
    r = local_store_list(rq->srv->store, rq->kind, rq->ns, &all, ret_rv);
    if (r < 0) {
        api_selector_free(ls);
        api_selector_free(fs);
        return reply_store_error(rq, r, "");
    }
    json_t *items = json_array();
    if (!items) {
        json_decref(all);
        api_selector_free(ls);
        api_selector_free(fs);
        return MHD_NO;
    }
    size_t i;
    json_t *o;
    json_array_foreach (all, i, o) {
        if (selected(ls, fs, o))
            json_array_append(items, o);
    }
    json_decref(all);
    api_selector_free(ls);
    api_selector_free(fs);
    *ret_items = items;
    return MHD_YES;
}

static json_t *make_list(const api_kind *k, json_t *items, uint64_t rv)
{
    char text[32];
    snprintf(text, sizeof(text), "%llu", (unsigned long long)rv);
    return json_pack("{s:s,s:s,s:{s:s},s:o}", "apiVersion", k->api_version, "kind", k->list_kind,
                     "metadata", "resourceVersion", text, "items", items);
}

/* Orders (namespace, name) pairs as the store lists them (namespace first, bytewise). */
static int key_cmp(const json_t *o, const char *ns, const char *name)
{
    const char *ons = api_meta_string(o, "namespace"), *oname = api_meta_string(o, "name");
    int c = strcmp(ons ? ons : "", ns);
    return c ? c : strcmp(oname ? oname : "", name);
}

/* `limit`/`continue`: the continue token is "<namespace>/<name>" of the last item returned
 * (namespaces cannot contain '/'). Returns the page (owned); items is consumed. */
static json_t *paginate(api_request *rq, json_t *items, json_t *list_md)
{
    const char *cont = query(rq->conn, "continue"), *lim = query(rq->conn, "limit");
    size_t start = 0, n = json_array_size(items);
    if (cont && *cont) {
        const char *slash = strchr(cont, '/');
        _cleanup_free_ char *ns = slash ? strndup(cont, (size_t)(slash - cont)) : NULL;
        if (ns)
            while (start < n && key_cmp(json_array_get(items, start), ns, slash + 1) <= 0)
                start++;
    }
    long limit = lim ? strtol(lim, NULL, 10) : 0;
    size_t end = n;
    if (limit > 0 && n - start > (size_t)limit) {
        end = start + (size_t)limit;
        json_t *last = json_array_get(items, end - 1);
        char key[600];
        snprintf(key, sizeof(key), "%s/%s", api_meta_string(last, "namespace"),
                 api_meta_string(last, "name"));
        json_object_set_new(list_md, "continue", json_string(key));
        json_object_set_new(list_md, "remainingItemCount", json_integer((json_int_t)(n - end)));
    }
    json_t *page = json_array();
    for (size_t i = start; page && i < end; i++)
        json_array_append(page, json_array_get(items, i));
    json_decref(items);
    return page;
}

/* A list's `resourceVersion` as kube-apiserver takes it: a non-negative decimal (400 otherwise,
 * with Go's strconv wording); one newer than any write is 504 Timeout "Too large resource
 * version" with retryAfterSeconds 1 (kube-apiserver first waits up to 3 s for its watch cache
 * to catch up; this store has no cache, so the answer comes at once). Any version up to the
 * current one is served from the current state ("not older than"). Returns a negative errno
 * (-EINVAL, -ETIMEDOUT) after queueing the error reply through *ret. */
static int check_list_rv(api_request *rq, uint64_t current, enum MHD_Result *ret)
{
    const char *v = query(rq->conn, "resourceVersion");
    if (!v || !*v)
        return 0;
    const char *why = NULL;
    uint64_t want = 0;
    for (const char *c = v; *c && !why; c++) {
        if (*c < '0' || *c > '9')
            why = "invalid syntax";
        else if (want > (UINT64_MAX - (uint64_t)(*c - '0')) / 10)
            why = "value out of range";
        else
            want = want * 10 + (uint64_t)(*c - '0');
    }
    if (why) {
        *ret = reply_status(rq->conn, KUBE_REASON_BAD_REQUEST, NULL, NULL,
                            "invalid resource version: resourceVersion: Invalid value: \"%s\": "
                            "strconv.ParseUint: parsing \"%s\": %s",
                            v, v, why);
        return -EINVAL;
    }
    if (want <= current)
        return 0;
    char msg[160];
    snprintf(msg, sizeof(msg), "Timeout: Too large resource version: %llu, current: %llu",
             (unsigned long long)want, (unsigned long long)current);
    json_t *st = status_failure(KUBE_REASON_TIMEOUT, msg, NULL, NULL);
    json_t *d = json_pack("{s:[{s:s,s:s}],s:i}", "causes", "reason", "ResourceVersionTooLarge",
                          "message", "Too large resource version", "retryAfterSeconds", 1);
    if (st && d)
        json_object_set_new(st, "details", d);
    else
        json_decref(d);
    *ret = reply_failure(rq->conn, st);
    return -ETIMEDOUT;
}

static enum MHD_Result handle_list(api_request *rq)
{
    json_t *items = NULL;
    uint64_t rv = 0;
    enum MHD_Result ret = MHD_NO;
    if (check_list_rv(rq, local_store_current_rv(rq->srv->store), &ret) < 0)
        return ret;
    ret = collect(rq, &items, &rv);
    if (!items)
        return ret;
    json_t *md = json_object();
    if (!md) {
        json_decref(items);
        return MHD_NO;
    }
    json_t *page = paginate(rq, items, md);
    json_t *list = page ? make_list(rq->kind, page, rv) : NULL;
    if (list)
        json_object_update(json_object_get(list, "metadata"), md);
    json_decref(md);
    return reply_json(rq->conn, 200, list);
}

static enum MHD_Result handle_delete_collection(api_request *rq)
{
    json_t *items = NULL;
    uint64_t rv = 0;
    enum MHD_Result ret = collect(rq, &items, &rv);
    if (!items)
        return ret;
    json_t *deleted = json_array();
    if (!deleted) {
        json_decref(items);
        return MHD_NO;
    }
    size_t i;
    json_t *o;
    json_array_foreach (items, i, o) {
        json_t *gone = NULL;
        api_request one = *rq;
        one.ns = api_meta_string(o, "namespace");
        one.name = api_meta_string(o, "name");
        update_ctx u = {.rq = &one};
        _cleanup_(api_error_clearp) api_error refused = API_ERROR_INIT;
        if (apiserver_snapshot_admit_delete(&one, &refused) < 0)
            continue; /* a snapshot still needed stays, as an item failing a check does */
        if (local_store_update(rq->srv->store, rq->kind, one.ns, one.name, delete_cb, &u, &gone) ==
            0)
            json_array_append_new(deleted, gone);
        json_decref(u.error);
    }
    json_decref(items);
    return reply_json(rq->conn, 200,
                      make_list(rq->kind, deleted, local_store_current_rv(rq->srv->store)));
}

enum MHD_Result apiserver_resource(api_request *rq)
{
    const char *m = rq->method;
    if (strcmp(m, "GET") == 0) {
        if (query_bool(rq->conn, "watch") && !rq->status && !rq->scale)
            return apiserver_watch(rq);
        if (!rq->name)
            return handle_list(rq);
        json_t *obj = NULL;
        int r = local_store_get(rq->srv->store, rq->kind, rq->ns, rq->name, &obj);
        if (r < 0)
            return reply_store_error(rq, r, rq->name);
        if (rq->scale) {
            json_t *sc = to_scale(obj);
            json_decref(obj);
            obj = sc;
        }
        return reply_json(rq->conn, 200, obj);
    }
    if (strcmp(m, "POST") == 0 && !rq->name)
        return handle_create(rq);
    if (strcmp(m, "PUT") == 0 && rq->name)
        return handle_update(rq, PATCH_NONE);
    if (strcmp(m, "PATCH") == 0 && rq->name)
        return handle_patch(rq);
    if (strcmp(m, "DELETE") == 0 && rq->name && !rq->status && !rq->scale)
        return handle_delete(rq);
    if (strcmp(m, "DELETE") == 0 && !rq->name)
        return handle_delete_collection(rq);
    return reply_status(rq->conn, KUBE_REASON_METHOD_NOT_ALLOWED, rq->kind, rq->name,
                        "the server does not allow this method on the requested resource");
}
