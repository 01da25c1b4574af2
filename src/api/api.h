/* The object model of the control plane: kinds of agents.x-k8s.io and extensions.agents.x-k8s.io
 * (shared/spec/UPSTREAM.md §2.1), validation with Kubernetes field paths, CRD defaults, label and
 * field selectors, JSON merge-patch and Kubernetes Status objects. Pure: no I/O, no globals that
 * change, so every backend (local store, kube client) and the fuzzer share it. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define API_VERSION "v1beta1"
#define API_GROUP_CORE "agents.x-k8s.io"
#define API_GROUP_EXT "extensions.agents.x-k8s.io"
/* Events (api-kind-event.c) live in their own group and version, outside api_kinds[]. */
#define API_GROUP_EVENTS "events.k8s.io"
#define API_VERSION_EVENTS "v1"

typedef struct api_errors api_errors;
typedef struct api_field api_field;
typedef struct api_column api_column;

/* A kind: its names and its shape. spec, status and columns are its table (api-field.h,
 * api-kind-*.c), the single source of its CRD, validation, defaults, pruning and printer
 * columns. */
typedef struct api_kind {
    const char *kind;           /* "Sandbox" */
    const char *list_kind;      /* "SandboxList" */
    const char *plural;         /* "sandboxes" */
    const char *singular;       /* "sandbox" */
    const char *group;          /* "agents.x-k8s.io" */
    const char *api_version;    /* "agents.x-k8s.io/v1beta1" */
    const char *short_names[2]; /* discovery shortNames, as upstream's CRDs */
    const char *aliases[3];     /* extra names the CLI accepts */
    bool has_status; /* status subresource: status is ignored on create/update of the object */
    bool has_scale;  /* scale subresource: spec.replicas / status.replicas / status.selector */
    const api_field *spec;      /* the object's "spec" field */
    const api_field *status;    /* its "status" field, or NULL */
    const api_column *columns;  /* {0}-terminated printer columns */
} api_kind;

extern const api_kind api_kinds[];
extern const size_t api_n_kinds;
/* events.k8s.io/v1 Event: found by api_kind_by_name and api_kind_by_plural, never listed in
 * api_kinds[] (it has no CRD and no spec). */
extern const api_kind api_event_kind;

/* Borrowed pointers into the static table, or NULL. */
const api_kind *api_kind_by_plural(const char *group, const char *plural);
const api_kind *api_kind_by_name(const char *name); /* kind, plural, singular or short name */
bool api_group_known(const char *group);

/* ---- declared fields (api-schema.c) ---- */

/* Removes from obj every field kind k's CRD schema does not declare, as kube-apiserver prunes
 * custom resources with structural schemas (subtrees that keep unknown fields, such as the pod
 * template's spec, are left alone). *ret_paths is a new array of the removed fields' paths
 * ("spec.foo", "spec.env[0].bar", "metadata.x"), sorted, owned by the caller. Returns 0 or
 * -ENOMEM. */
int api_prune_unknown(const api_kind *k, json_t *obj, json_t **ret_paths);

/* ---- CRDs (api-crd.c) ---- */

/* The CustomResourceDefinition of kind k (apiextensions.k8s.io/v1). With k8s_refs, fields that
 * hold a Kubernetes type carry "x-asb-k8s-type" for scripts/gen-crds.py to expand. New reference
 * or NULL on ENOMEM. */
json_t *api_crd(const api_kind *k, bool k8s_refs);

/* ---- field errors (k8s.io/apimachinery field.ErrorList) ---- */
typedef enum api_error_type {
    API_FIELD_REQUIRED,    /* "Required value" */
    API_FIELD_INVALID,     /* "Invalid value" */
    API_FIELD_UNSUPPORTED, /* "Unsupported value" */
    API_FIELD_DUPLICATE,   /* "Duplicate value" */
    API_FIELD_TOO_LONG,    /* "Too long" */
    API_FIELD_FORBIDDEN,   /* "Forbidden" */
    API_FIELD_TYPE,        /* wrong JSON type (structural schema) */
    API_FIELD_NOT_FOUND,   /* "Not found": a reference to nothing */
} api_error_type;

struct api_errors {
    size_t n;
    struct api_field_error {
        api_error_type type;
        char *field;   /* "spec.podTemplate.spec.containers[0].image" */
        char *message; /* full "field: Required value..." text */
    } * v;
    bool oom;
};

/* Records one error. `value` is the offending value (may be NULL); detail may be NULL. */
void api_errors_add(api_errors *errs, api_error_type type, const char *field, const json_t *value,
                    const char *detail_fmt, ...) __attribute__((format(printf, 5, 6)));
/* Validation ratcheting, as kube-apiserver does for custom resources: on an update, drops the
 * errors of fields whose value is the same in obj and old (a rule that came after the object
 * was stored does not block its status writes, or updates that leave that field alone). */
void api_errors_ratchet(api_errors *errs, const json_t *obj, const json_t *old);
/* Whether an error was recorded for field (exactly that path). */
bool api_errors_has_field(const api_errors *errs, const char *field);
void api_errors_clear(api_errors *errs);
/* Kubernetes aggregate text: `Kind.group "name" is invalid: msg` or `...: [msg1, msg2]`.
 * Owned by the caller. */
char *api_errors_format(const api_errors *errs, const api_kind *k, const char *name);
/* details.causes array for the Status object; owned reference. */
json_t *api_errors_causes(const api_errors *errs);

/* ---- names ---- */
/* RFC 1123 subdomain (<=253) / label (<=63). On failure *ret_detail is a static message. */
bool api_is_dns1123_subdomain(const char *s, const char **ret_detail);
bool api_is_dns1123_label(const char *s, const char **ret_detail);
bool api_is_qualified_name(const char *s);
bool api_is_label_value(const char *s);
/* generateName: prefix cut to 58 bytes + 5 chars picked by `random` bytes from kube's alphabet
 * "bcdfghjklmnpqrstvwxz2456789". Owned by the caller. */
char *api_generate_name(const char *prefix, const unsigned char random[5]);

/* ---- objects ---- */
/* The deepest nesting of objects and arrays an object of the API may have (Kubernetes objects
 * nest about a dozen levels); a scalar has depth 0, {} and [] depth 1. */
#define API_MAX_DEPTH 100
bool api_json_deeper_than(const json_t *j, unsigned max);
/* The same on JSON text, before it is parsed (the text need not be valid). */
bool api_json_text_deeper_than(const char *s, size_t n, unsigned max);
/* Validates a whole object of kind k. old is the stored object on update (NULL on create).
 * Checks metadata (name, namespace, labels, annotations), structural types and spec rules. */
void api_validate(const api_kind *k, const json_t *obj, const json_t *old, api_errors *errs);
/* Applies CRD defaults (§2.1) to obj["spec"] in place, when spec is an object. */
void api_default(const api_kind *k, json_t *obj);

/* RFC 7386 JSON merge patch. Returns a new reference (target is not modified), NULL on ENOMEM. */
json_t *api_merge_patch(const json_t *target, const json_t *patch);
/* The same merge, but the result shares every member of target the patch leaves alone: only the
 * objects on the patch's paths are new. For targets nobody modifies (the store's objects): who
 * changes the result below those paths first takes its own copy (api_own_member/element). */
json_t *api_merge_patch_shared(const json_t *target, const json_t *patch);
/* Copy on write: parent's member key (or array's element i), replaced by a shallow copy first
 * when another reference shares it, so the caller may modify it in place. NULL when absent (or
 * out of memory). */
json_t *api_own_member(json_t *parent, const char *key);
json_t *api_own_element(json_t *array, size_t i);

/* RFC 6902 JSON patch. Returns a new reference or NULL with *ret_error set (static text). */
json_t *api_json_patch(const json_t *target, const json_t *patch, const char **ret_error);

/* ---- selectors ---- */
typedef enum api_sel_op {
    API_SEL_EQ,
    API_SEL_NEQ,
    API_SEL_IN,
    API_SEL_NOTIN,
    API_SEL_EXISTS,
    API_SEL_NOT_EXISTS,
    API_SEL_GT,
    API_SEL_LT,
} api_sel_op;

typedef struct api_selector {
    size_t n;
    struct api_requirement {
        char *key;
        api_sel_op op;
        size_t n_values;
        char **values;
    } * reqs;
} api_selector;

/* Parses a label selector (`a=b,c!=d,e,!f,g in (x,y),h notin (z),i>1`). Empty or NULL selects
 * everything. Returns 0, -EINVAL with *ret_error (owned) set, or -ENOMEM. */
int api_label_selector_parse(const char *s, api_selector **ret, char **ret_error);
/* Field selector: `metadata.name=x,metadata.namespace!=y` (=, ==, !=); other fields -EINVAL. */
int api_field_selector_parse(const char *s, api_selector **ret, char **ret_error);
api_selector *api_selector_free(api_selector *s);
/* labels may be NULL (no labels). */
bool api_label_selector_matches(const api_selector *s, const json_t *labels);
bool api_field_selector_matches(const api_selector *s, const json_t *obj);

/* ---- Status ---- */
/* Kubernetes Status failure object; details only when name or kind given. Owned reference. */
json_t *api_status_failure(unsigned code, const char *reason, const char *message,
                           const api_kind *k, const char *name);

/* Small accessors: borrowed strings or NULL. */
const char *api_meta_string(const json_t *obj, const char *field);
/* metadata.resourceVersion as a number; 0 when there is none. */
uint64_t api_meta_rv(const json_t *obj);

/* jansson's json_decrefp accepts NULL. */
#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))
