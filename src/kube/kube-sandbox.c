/* The Sandbox reconciler on a cluster (shared/spec/UPSTREAM.md §2.4): PVCs from
 * volumeClaimTemplates, the Pod, the headless Service, then status and conditions. Children carry
 * a controller ownerReference (blockOwnerDeletion) so the cluster's garbage collector removes
 * them with the Sandbox. Reads come from the informer caches; writes go to the API server and
 * are level-triggered: the next event re-runs the whole reconcile. */
#include "kube/kube.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "reconcile/reconcile.h"
#include "shared/log.h"

typedef struct sbx {
    kube_ctl *ctl;
    json_t *sb; /* borrowed from the cache; never modified */
    const char *ns, *name;
    char hash[9];
    json_t *errors; /* array of strings */
    json_t *ann;    /* merge patch of the Sandbox's annotations (key -> value|null) */
    bool oom;       /* an error could not be recorded in errors: "out of memory" */
} sbx;

static bool has_errors(const sbx *c)
{
    return c->oom || json_array_size(c->errors) > 0;
}

static void add_error(sbx *c, const char *fmt, ...) _printf_(2, 3);
static void add_error(sbx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0 || json_array_append_new(c->errors, json_string(s)) < 0)
        c->oom = true;
    va_end(ap);
}

static json_t *jget(const json_t *o, const char *a, const char *b)
{
    json_t *x = json_object_get(o, a);
    return b ? json_object_get(x, b) : x;
}

static const char *label(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(jget(obj, "metadata", "labels"), key));
}

static const char *annotation(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(jget(obj, "metadata", "annotations"), key));
}

static bool adoptable(const json_t *obj, const char *hash)
{
    const char *a = label(obj, "agents.x-k8s.io/adoptable");
    const char *h = label(obj, RECONCILE_LABEL_NAME_HASH);
    return (a && strcmp(a, "true") == 0) || (h && strcmp(h, hash) == 0);
}

/* ownerReferences of obj with its controller replaced by one pointing at owner. */
/* Owned, NULL on ENOMEM. */
static json_t *refs_with_controller(const json_t *obj, const json_t *owner)
{
    _cleanup_json_ json_t *out = json_array();
    if (!out)
        return NULL;
    size_t i;
    json_t *r;
    json_array_foreach (jget(obj, "metadata", "ownerReferences"), i, r) {
        if (!json_is_true(json_object_get(r, "controller")) && json_array_append(out, r) < 0)
            return NULL;
    }
    if (json_array_append_new(out, reconcile_owner_ref(owner)) < 0)
        return NULL;
    return TAKE_PTR(out);
}

/* Takes extra_patch (may be NULL). */
static int adopt(sbx *c, kube_res r, const json_t *obj, json_t *extra_patch)
{
    _cleanup_json_ json_t *patch = extra_patch ? extra_patch : json_object();
    json_t *md = json_object_get(patch, "metadata");
    if (patch && !md && json_object_set_new(patch, "metadata", md = json_object()) < 0)
        md = NULL;
    if (!patch || !md ||
        json_object_set_new(md, "ownerReferences", refs_with_controller(obj, c->sb)) < 0)
        return -ENOMEM;
    return kube_patch(c->ctl, r, obj, NULL, patch, true, NULL);
}

/* ---- PVCs (§2.4.1) ---- */
static void reconcile_pvcs(sbx *c)
{
    size_t i;
    json_t *t;
    json_array_foreach (jget(c->sb, "spec", "volumeClaimTemplates"), i, t) {
        const char *tn = kube_str(t, "metadata.name");
        if (!tn)
            continue;
        _cleanup_free_ char *pname = NULL;
        if (asprintf(&pname, "%s-%s", tn, c->name) < 0) {
            pname = NULL;
            add_error(c, "PVC %s: %s", tn, strerror(ENOMEM));
            return;
        }
        _cleanup_json_ json_t *pvc = kube_informer_get(&c->ctl->inf[KR_PVC], c->ns, pname);
        int e = 0;
        if (!pvc) {
            json_t *labels = json_deep_copy(jget(t, "metadata", "labels")) ?: json_object();
            if (labels &&
                json_object_set_new(labels, RECONCILE_LABEL_NAME_HASH, json_string(c->hash)) < 0)
                labels = (json_decref(labels), NULL); /* json_pack below fails on NULL */
            _cleanup_json_ json_t *o =
                json_pack("{s:s,s:s,s:{s:s,s:s,s:o,s:[o]},s:o}", "apiVersion", "v1", "kind",
                          "PersistentVolumeClaim", "metadata", "name", pname, "namespace", c->ns,
                          "labels", labels, "ownerReferences", reconcile_owner_ref(c->sb), "spec",
                          json_deep_copy(json_object_get(t, "spec")) ?: json_object());
            json_t *ann = jget(t, "metadata", "annotations");
            const char *from = kube_snapshot_of_sandbox(c->sb), *why = NULL;
            _cleanup_json_ json_t *ds = NULL;
            /* A fork: the PVC starts as the snapshot's copy of this volume. */
            if (from && kube_snapshot_data_source(c->ctl, c->ns, from, tn, &ds, &why) < 0) {
                add_error(c, "PVC %s: snapshot %s: %s", pname, from, why ? why : "out of memory");
                return;
            }
            if (o && ds && json_object_set(json_object_get(o, "spec"), "dataSource", ds) < 0)
                e = -ENOMEM;
            else if (o && ann &&
                     json_object_set(json_object_get(o, "metadata"), "annotations", ann) < 0)
                e = -ENOMEM;
            else
                e = o ? kube_create(c->ctl, KR_PVC, c->ns, o, NULL) : -ENOMEM;
            if (e == -EEXIST)
                e = 0;
        } else if (reconcile_controlled_by(pvc, c->sb)) {
            continue;
        } else if (reconcile_controller_ref(pvc)) {
            add_error(c, "PVC %s is controlled by another object", pname);
            return;
        } else if (adoptable(pvc, c->hash)) {
            e = adopt(c, KR_PVC, pvc, NULL);
        } else {
            add_error(c, "cannot adopt unowned PVC %s: it is not labelled adoptable", pname);
            return;
        }
        if (e < 0) {
            add_error(c, "PVC %s: %s", pname, strerror(-e));
            return;
        }
    }
}

/* ---- Pod (§2.4.2) ---- */
static const char *normalize_created_by(const char *v)
{
    if (!v)
        return NULL;
    if (strcmp(v, "go-client") == 0 || strcmp(v, "python-client") == 0 ||
        strcmp(v, "controller") == 0)
        return v;
    return "unknown";
}

static bool controller_is(const json_t *obj, const char *group, const char *kind)
{
    const json_t *ref = reconcile_controller_ref(obj);
    if (!ref)
        return false;
    const char *av = json_string_value(json_object_get(ref, "apiVersion"));
    const char *k = json_string_value(json_object_get(ref, "kind"));
    if (!av || strncmp(av, group, strlen(group)) != 0 || av[strlen(group)] != '/')
        return false;
    return !kind || (k && strcmp(k, kind) == 0);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted comma list of the non-system keys of m. Owned, NULL on ENOMEM. */
static char *key_list(const json_t *m)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    _cleanup_free_ const char **keys = calloc(json_object_size(m) + 1, sizeof *keys);
    if (!keys)
        return NULL;
    json_object_foreach ((json_t *)m, k, v)
        if (!kube_is_system_key(k))
            keys[n++] = k;
    qsort(keys, n, sizeof *keys, cmp_str);
    _cleanup_buf_ buf out = BUF_INIT;
    for (size_t i = 0; i < n; i++)
        if ((i && buf_append_byte(&out, ',') < 0) || buf_append_str(&out, keys[i]) < 0)
            return NULL;
    return buf_steal(&out, NULL);
}

/* Desired labels and annotations of the pod (§2.4.2), both owned. 0 or -ENOMEM. */
static int desired_pod_meta(sbx *c, json_t **ret_labels, json_t **ret_ann)
{
    json_t *tl = jget(jget(c->sb, "spec", "podTemplate"), "metadata", "labels");
    json_t *ta = jget(jget(c->sb, "spec", "podTemplate"), "metadata", "annotations");
    _cleanup_json_ json_t *labels = json_object(), *ann = json_object();
    _cleanup_free_ char *pl = key_list(tl), *pa = key_list(ta);
    if (!labels || !ann || !pl || !pa)
        return -ENOMEM;
    int k = 0; /* jansson setters return -1: any failure makes k -1 */
    const char *key;
    json_t *v;
    json_object_foreach (tl, key, v)
        if (!kube_is_system_key(key))
            k |= json_object_set(labels, key, v);
    json_object_foreach (ta, key, v)
        if (!kube_is_system_key(key))
            k |= json_object_set(ann, key, v);
    k |= json_object_set_new(labels, RECONCILE_LABEL_NAME_HASH, json_string(c->hash));
    const char *wp = label(c->sb, RECONCILE_LABEL_WARM_POOL);
    if (wp && controller_is(c->sb, API_GROUP_EXT, "SandboxWarmPool"))
        k |= json_object_set_new(labels, RECONCILE_LABEL_WARM_POOL, json_string(wp));
    const char *th = label(c->sb, RECONCILE_LABEL_TEMPLATE_REF_HASH);
    if (th && controller_is(c->sb, API_GROUP_EXT, NULL))
        k |= json_object_set_new(labels, RECONCILE_LABEL_TEMPLATE_REF_HASH, json_string(th));
    const char *cb = normalize_created_by(label(c->sb, RECONCILE_LABEL_CREATED_BY));
    if (cb)
        k |= json_object_set_new(labels, RECONCILE_LABEL_CREATED_BY, json_string(cb));
    k |= json_object_set_new(ann, "agents.x-k8s.io/propagated-labels", json_string(pl));
    k |= json_object_set_new(ann, "agents.x-k8s.io/propagated-annotations", json_string(pa));
    if (k)
        return -ENOMEM;
    *ret_labels = TAKE_PTR(labels);
    *ret_ann = TAKE_PTR(ann);
    return 0;
}

/* spec.volumes gets a volume per volumeClaimTemplate, replacing a template volume of the same
 * name (StatefulSet semantics). 0 or -ENOMEM. */
static int add_claim_volumes(sbx *c, json_t *spec)
{
    json_t *vcts = jget(c->sb, "spec", "volumeClaimTemplates");
    if (!json_array_size(vcts))
        return 0;
    json_t *vols = json_object_get(spec, "volumes");
    if (!json_is_array(vols) && json_object_set_new(spec, "volumes", vols = json_array()) < 0)
        return -ENOMEM;
    size_t i;
    json_t *t;
    json_array_foreach (vcts, i, t) {
        const char *tn = kube_str(t, "metadata.name");
        if (!tn)
            continue;
        _cleanup_free_ char *claim = NULL;
        if (asprintf(&claim, "%s-%s", tn, c->name) < 0)
            return -ENOMEM;
        _cleanup_json_ json_t *vol =
            json_pack("{s:s,s:{s:s}}", "name", tn, "persistentVolumeClaim", "claimName", claim);
        if (!vol)
            return -ENOMEM;
        size_t j;
        json_t *ov;
        bool replaced = false;
        json_array_foreach (vols, j, ov) {
            const char *on = json_string_value(json_object_get(ov, "name"));
            if (on && strcmp(on, tn) == 0) {
                if (json_array_set(vols, j, vol) < 0)
                    return -ENOMEM;
                replaced = true;
                break;
            }
        }
        if (!replaced && json_array_append(vols, vol) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The new Pod of the Sandbox. Owned, NULL on ENOMEM. */
static json_t *build_pod(sbx *c)
{
    _cleanup_json_ json_t *labels = NULL, *ann = NULL;
    if (desired_pod_meta(c, &labels, &ann) < 0)
        return NULL;
    /* The propagated-* lists only when non-empty. */
    if (!*json_string_value(json_object_get(ann, "agents.x-k8s.io/propagated-labels")))
        json_object_del(ann, "agents.x-k8s.io/propagated-labels");
    if (!*json_string_value(json_object_get(ann, "agents.x-k8s.io/propagated-annotations")))
        json_object_del(ann, "agents.x-k8s.io/propagated-annotations");
    _cleanup_json_ json_t *spec =
        json_deep_copy(jget(jget(c->sb, "spec", "podTemplate"), "spec", NULL)) ?: json_object();
    if (!spec || add_claim_volumes(c, spec) < 0)
        return NULL;
    const char *from = kube_snapshot_of_sandbox(c->sb), *why = NULL;
    if (from && kube_snapshot_pod_images(c->ctl, c->ns, from, spec, &why) < 0) {
        add_error(c, "pod %s: snapshot %s: %s", c->name, from, why ? why : "out of memory");
        return NULL;
    }
    _cleanup_json_ json_t *md =
        json_pack("{s:s,s:s,s:O,s:[o]}", "name", c->name, "namespace", c->ns, "labels", labels,
                  "ownerReferences", reconcile_owner_ref(c->sb));
    if (!md || (json_object_size(ann) && json_object_set(md, "annotations", ann) < 0))
        return NULL;
    return json_pack("{s:s,s:s,s:O,s:O}", "apiVersion", "v1", "kind", "Pod", "metadata", md, "spec",
                     spec);
}

/* Sets to null in patch_map the keys of a propagated-* list that the template dropped.
 * 0 or -ENOMEM. */
static int scrub_listed(json_t *patch_map, const json_t *cur, const char *list, const json_t *want,
                        const char *keep1, const char *keep2)
{
    if (!list)
        return 0;
    _cleanup_free_ char *dup = strdup(list);
    if (!dup)
        return -ENOMEM;
    char *save = NULL;
    for (char *k = strtok_r(dup, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        if (json_object_get(want, k) || !json_object_get(cur, k))
            continue;
        if ((keep1 && strcmp(k, keep1) == 0) || (keep2 && strcmp(k, keep2) == 0))
            continue;
        if (json_object_set_new(patch_map, k, json_null()) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The merge patch of the pod's labels and annotations (§2.4.2), NULL when none is needed.
 * 0 or -ENOMEM. */
static int pod_meta_patch(sbx *c, const json_t *pod, json_t **ret)
{
    _cleanup_json_ json_t *labels = NULL, *ann = NULL;
    _cleanup_json_ json_t *pl = json_object(), *pa = json_object();
    if (!pl || !pa || desired_pod_meta(c, &labels, &ann) < 0)
        return -ENOMEM;
    json_t *cl = jget(pod, "metadata", "labels"), *ca = jget(pod, "metadata", "annotations");
    int e = 0;
    const char *k;
    json_t *v;
    json_object_foreach (labels, k, v)
        if (!json_equal(json_object_get(cl, k), v))
            e |= json_object_set(pl, k, v);
    json_object_foreach (ann, k, v)
        if (!json_equal(json_object_get(ca, k), v))
            e |= json_object_set(pa, k, v);
    static const char *const ext[] = {RECONCILE_LABEL_WARM_POOL, RECONCILE_LABEL_TEMPLATE_REF_HASH,
                                      RECONCILE_LABEL_CREATED_BY};
    for (size_t i = 0; i < ELEMENTSOF(ext); i++)
        if (json_object_get(cl, ext[i]) && !json_object_get(labels, ext[i]))
            e |= json_object_set_new(pl, ext[i], json_null());
    if (e ||
        scrub_listed(pl, cl, annotation(pod, "agents.x-k8s.io/propagated-labels"), labels,
                     RECONCILE_LABEL_NAME_HASH, NULL) < 0 ||
        scrub_listed(pa, ca, annotation(pod, "agents.x-k8s.io/propagated-annotations"), ann,
                     "agents.x-k8s.io/propagated-labels",
                     "agents.x-k8s.io/propagated-annotations") < 0)
        return -ENOMEM;
    *ret = NULL;
    if (!json_object_size(pl) && !json_object_size(pa))
        return 0;
    *ret = json_pack("{s:{s:O,s:O}}", "metadata", "labels", pl, "annotations", pa);
    return *ret ? 0 : -ENOMEM;
}

static void reconcile_pod_meta(sbx *c, const json_t *pod)
{
    _cleanup_json_ json_t *patch = NULL;
    int e = pod_meta_patch(c, pod, &patch);
    if (e == 0 && patch)
        e = kube_patch(c->ctl, KR_POD, pod, NULL, patch, false, NULL);
    if (e < 0)
        add_error(c, "patch pod %s metadata: %s", kube_str(pod, "metadata.name"), strerror(-e));
}

/* Records the Sandbox's pod-name annotation (a name, or json_null() to remove it). */
static void set_pod_name(sbx *c, json_t *value)
{
    if (json_object_set_new(c->ann, RECONCILE_ANN_POD_NAME, value) < 0)
        add_error(c, "annotate sandbox: %s", strerror(ENOMEM));
}

typedef enum pod_state {
    POD_NONE,
    POD_OWNED,
    POD_MULTIPLE,
    POD_TERMINATING, /* suspended, owned pod still present */
    POD_NOT_OWNED,   /* suspended, pod not owned by us */
} pod_state;

/* Returns the owned pod (new reference) or NULL, and the state. */
static json_t *reconcile_pod(sbx *c, bool suspended, pod_state *ret_state, size_t *ret_n)
{
    _cleanup_json_ json_t *all =
        kube_informer_list(&c->ctl->inf[KR_POD], c->ns, RECONCILE_LABEL_NAME_HASH, c->hash);
    size_t i, n_owned = 0;
    json_t *p, *owned = NULL; /* borrowed from all */
    json_array_foreach (all, i, p)
        if (reconcile_controlled_by(p, c->sb)) {
            owned = p;
            n_owned++;
        }
    *ret_n = n_owned;
    *ret_state = POD_NONE;
    if (n_owned > 1) {
        *ret_state = POD_MULTIPLE;
        return NULL;
    }
    const char *annotated = annotation(c->sb, RECONCILE_ANN_POD_NAME);
    const char *pod_name = annotated && *annotated ? annotated : c->name;
    json_t *pod = kube_informer_get(&c->ctl->inf[KR_POD], c->ns, pod_name);
    if (!pod && annotated && *annotated) {
        set_pod_name(c, json_null());
        annotated = NULL;
    }
    if (!pod && n_owned == 1)
        pod = json_incref(owned);

    if (suspended) {
        if (annotated)
            set_pod_name(c, json_null());
        if (!pod)
            return NULL;
        if (!reconcile_controlled_by(pod, c->sb)) {
            *ret_state = POD_NOT_OWNED;
            json_decref(pod);
            return NULL;
        }
        *ret_state = POD_TERMINATING;
        if (!reconcile_deleting(pod)) {
            int e = kube_delete(c->ctl, KR_POD, pod, NULL);
            if (e < 0)
                add_error(c, "delete pod %s: %s", pod_name, strerror(-e));
        }
        return pod;
    }

    if (pod) {
        if (!reconcile_controlled_by(pod, c->sb)) {
            if (reconcile_controller_ref(pod)) {
                add_error(c, "pod %s is controlled by another object",
                          kube_str(pod, "metadata.name"));
                if (annotated)
                    set_pod_name(c, json_null());
                json_decref(pod);
                return NULL;
            }
            if (!adoptable(pod, c->hash)) {
                add_error(c, "cannot adopt unowned pod %s: it is not labelled adoptable",
                          kube_str(pod, "metadata.name"));
                json_decref(pod);
                return NULL;
            }
            int e = adopt(c, KR_POD, pod, NULL);
            if (e < 0) {
                add_error(c, "adopt pod %s: %s", kube_str(pod, "metadata.name"), strerror(-e));
                json_decref(pod);
                return NULL;
            }
        }
        reconcile_pod_meta(c, pod);
        *ret_state = POD_OWNED;
        if (!annotated)
            set_pod_name(c, json_string(kube_str(pod, "metadata.name")));
        return pod;
    }

    _cleanup_json_ json_t *np = build_pod(c);
    if (!np && has_errors(c))
        return NULL;
    json_t *created = NULL;
    int e = np ? kube_create(c->ctl, KR_POD, c->ns, np, &created) : -ENOMEM;
    if (e == -EEXIST) {
        /* The cache lags: the next event on the pod re-runs this reconcile. */
        return NULL;
    }
    if (e < 0) {
        add_error(c, "create pod %s: %s", c->name, strerror(-e));
        _cleanup_free_ char *msg = NULL;
        if (asprintf(&msg, "cannot create pod %s: %s", c->name, strerror(-e)) >= 0)
            kube_event(c->ctl, c->sb, "Warning", "FailedCreate", msg);
        return NULL;
    }
    log_info("created pod", "namespace", c->ns, "sandbox", c->name);
    _cleanup_free_ char *msg = NULL;
    if (asprintf(&msg, "created pod %s", c->name) >= 0)
        kube_event(c->ctl, c->sb, "Normal", "Created", msg);
    set_pod_name(c, json_string(c->name));
    *ret_state = POD_OWNED;
    *ret_n = 1;
    return created;
}

/* ---- Service (§2.4.3) ---- */
static bool name_used(const json_t *ports, const char *name, const json_t *self)
{
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        const char *n = json_string_value(json_object_get(p, "name"));
        if (p != self && n && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

/* 0 or -ENOMEM. */
static int add_ports(json_t *out, const json_t *containers, bool sidecars_only)
{
    size_t i, j;
    json_t *ctr, *p;
    json_array_foreach (containers, i, ctr) {
        if (sidecars_only) {
            const char *rp = json_string_value(json_object_get(ctr, "restartPolicy"));
            if (!rp || strcmp(rp, "Always") != 0)
                continue;
        }
        json_array_foreach (json_object_get(ctr, "ports"), j, p) {
            json_int_t port = json_integer_value(json_object_get(p, "containerPort"));
            const char *proto = json_string_value(json_object_get(p, "protocol"));
            if (!proto || !*proto)
                proto = "TCP";
            if (port <= 0)
                continue;
            /* The first explicit name wins: a name another port already has is not reused. */
            const char *pname = json_string_value(json_object_get(p, "name"));
            if (pname && (!*pname || name_used(out, pname, NULL)))
                pname = NULL;
            size_t k;
            json_t *q;
            bool dup = false;
            json_array_foreach (out, k, q) {
                if (json_integer_value(json_object_get(q, "port")) == port &&
                    strcmp(json_string_value(json_object_get(q, "protocol")), proto) == 0) {
                    dup = true;
                    if (pname && !json_object_get(q, "name") &&
                        json_object_set_new(q, "name", json_string(pname)) < 0)
                        return -ENOMEM;
                    break;
                }
            }
            if (dup)
                continue;
            json_t *e =
                json_pack("{s:I,s:s,s:I}", "port", port, "protocol", proto, "targetPort", port);
            if (!e || (pname && json_object_set_new(e, "name", json_string(pname)) < 0) ||
                json_array_append_new(out, e) < 0)
                return -ENOMEM; /* json_array_append_new releases e */
        }
    }
    return 0;
}

static int cmp_port(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t px = json_integer_value(json_object_get(x, "port"));
    json_int_t py = json_integer_value(json_object_get(y, "port"));
    if (px != py)
        return px < py ? -1 : 1;
    return strcmp(json_string_value(json_object_get(x, "protocol")),
                  json_string_value(json_object_get(y, "protocol")));
}

/* The Service's ports (§2.4.3). Owned, NULL on ENOMEM. */
static json_t *service_ports(const json_t *pod_spec)
{
    _cleanup_json_ json_t *ports = json_array();
    if (!ports || add_ports(ports, json_object_get(pod_spec, "containers"), false) < 0 ||
        add_ports(ports, json_object_get(pod_spec, "initContainers"), true) < 0)
        return NULL;
    size_t n = json_array_size(ports);
    _cleanup_free_ json_t **v = calloc(n + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(ports, i);
    qsort(v, n, sizeof *v, cmp_port);
    _cleanup_json_ json_t *sorted = json_array();
    for (size_t i = 0; sorted && i < n; i++)
        if (json_array_append(sorted, v[i]) < 0)
            return NULL;
    if (!sorted)
        return NULL;
    json_decref(ports);
    ports = TAKE_PTR(sorted);
    /* Unnamed ports get p-<port>-<proto>, with -2, -3, ... on a collision. */
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        if (json_object_get(p, "name"))
            continue;
        char base[64], name[80];
        char proto[16];
        snprintf(proto, sizeof proto, "%s", json_string_value(json_object_get(p, "protocol")));
        for (char *s = proto; *s; s++)
            *s = (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
        snprintf(base, sizeof base, "p-%lld-%s",
                 (long long)json_integer_value(json_object_get(p, "port")), proto);
        snprintf(name, sizeof name, "%s", base);
        for (int k = 2; name_used(ports, name, p); k++)
            snprintf(name, sizeof name, "%s-%d", base, k);
        if (json_object_set_new(p, "name", json_string(name)) < 0)
            return NULL;
    }
    return TAKE_PTR(ports);
}

/* A merge patch value that turns map cur into want (extra keys -> null). Owned, NULL on
 * ENOMEM (json_pack's "o" then fails too). */
static json_t *map_patch(const json_t *cur, const json_t *want)
{
    _cleanup_json_ json_t *p = json_deep_copy(want);
    if (!p)
        return NULL;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)cur, k, v)
        if (!json_object_get(want, k) && json_object_set_new(p, k, json_null()) < 0)
            return NULL;
    return TAKE_PTR(p);
}

/* Returns whether a Service is tracked. */
static bool reconcile_service(sbx *c)
{
    json_t *flag = jget(c->sb, "spec", "service");
    _cleanup_json_ json_t *svc = kube_informer_get(&c->ctl->inf[KR_SERVICE], c->ns, c->name);
    _cleanup_json_ json_t *ports =
        service_ports(jget(jget(c->sb, "spec", "podTemplate"), "spec", NULL));
    _cleanup_json_ json_t *sel = json_pack("{s:s}", RECONCILE_LABEL_NAME_HASH, c->hash);
    int e = 0;
    if (!ports || !sel) {
        add_error(c, "service %s: %s", c->name, strerror(ENOMEM));
        return svc && reconcile_controlled_by(svc, c->sb);
    }
    if (json_is_true(flag)) {
        if (!svc) {
            _cleanup_json_ json_t *o =
                json_pack("{s:s,s:s,s:{s:s,s:s,s:O,s:[o]},s:{s:s,s:O,s:O}}", "apiVersion", "v1",
                          "kind", "Service", "metadata", "name", c->name, "namespace", c->ns,
                          "labels", sel, "ownerReferences", reconcile_owner_ref(c->sb), "spec",
                          "clusterIP", "None", "selector", sel, "ports", ports);
            e = o ? kube_create(c->ctl, KR_SERVICE, c->ns, o, NULL) : -ENOMEM;
            if (e == -EEXIST)
                e = 0;
        } else if (reconcile_controlled_by(svc, c->sb)) {
            bool drift = !json_equal(jget(svc, "spec", "selector"), sel) ||
                         !json_equal(jget(svc, "spec", "ports") ?: ports, ports) ||
                         !label(svc, RECONCILE_LABEL_NAME_HASH) ||
                         strcmp(label(svc, RECONCILE_LABEL_NAME_HASH), c->hash) != 0;
            if (drift) {
                _cleanup_json_ json_t *patch =
                    json_pack("{s:{s:O},s:{s:o,s:O}}", "metadata", "labels", sel, "spec",
                              "selector", map_patch(jget(svc, "spec", "selector"), sel), "ports",
                              json_array_size(ports) ? ports : json_null());
                e = patch ? kube_patch(c->ctl, KR_SERVICE, svc, NULL, patch, false, NULL) : -ENOMEM;
            }
        } else if (reconcile_controller_ref(svc)) {
            add_error(c, "service %s is controlled by another object", c->name);
            return false;
        } else {
            const char *cip = kube_str(svc, "spec.clusterIP");
            if (!adoptable(svc, c->hash) || (cip && *cip && strcmp(cip, "None") != 0)) {
                add_error(c, "cannot adopt unowned service %s", c->name);
                return false;
            }
            json_t *patch = json_pack("{s:{s:O},s:{s:o,s:O}}", "metadata", "labels", sel, "spec",
                                      "selector", map_patch(jget(svc, "spec", "selector"), sel),
                                      "ports", json_array_size(ports) ? ports : json_null());
            e = patch ? adopt(c, KR_SERVICE, svc, patch) : -ENOMEM;
        }
        if (e < 0) {
            add_error(c, "service %s: %s", c->name, strerror(-e));
            return svc != NULL;
        }
        return true;
    }
    if (!svc || !reconcile_controlled_by(svc, c->sb))
        return false;
    if (json_is_false(flag)) {
        e = kube_delete(c->ctl, KR_SERVICE, svc, NULL);
        if (e < 0)
            add_error(c, "delete service %s: %s", c->name, strerror(-e));
        return false;
    }
    /* nil: keep an owned Service, repair label and selector (ports untouched). */
    const char *h = label(svc, RECONCILE_LABEL_NAME_HASH);
    if (!json_equal(jget(svc, "spec", "selector"), sel) || !h || strcmp(h, c->hash) != 0) {
        _cleanup_json_ json_t *patch =
            json_pack("{s:{s:O},s:{s:o}}", "metadata", "labels", sel, "spec", "selector",
                      map_patch(jget(svc, "spec", "selector"), sel));
        e = patch ? kube_patch(c->ctl, KR_SERVICE, svc, NULL, patch, false, NULL) : -ENOMEM;
        if (e < 0)
            add_error(c, "service %s: %s", c->name, strerror(-e));
    }
    return true;
}

/* ---- status (§2.4.4, §2.4.5): the rules are the core's, this is what a cluster observed ---- */
/* The pod's IPs as an array of strings (status.podIPs, else status.podIP). Owned, NULL on
 * ENOMEM. */
static json_t *pod_ips(const json_t *pod)
{
    json_t *out = json_array();
    size_t i;
    json_t *ip;
    json_array_foreach (jget(pod, "status", "podIPs"), i, ip) {
        const char *s = json_string_value(json_object_get(ip, "ip"));
        if (out && s && json_array_append_new(out, json_string(s)) < 0)
            return json_decref(out), NULL;
    }
    const char *one = kube_str(pod, "status.podIP");
    if (out && !json_array_size(out) && one && json_array_append_new(out, json_string(one)) < 0)
        return json_decref(out), NULL;
    return out;
}

/* Writes the difference between status and the stored one as a merge patch of /status. */
static int write_status(sbx *c, const json_t *status)
{
    json_t *old = json_object_get(c->sb, "status");
    _cleanup_json_ json_t *diff = json_object();
    if (!diff)
        return -ENOMEM;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)status, k, v)
        if (!json_equal(json_object_get(old, k), v) && json_object_set(diff, k, v) < 0)
            return -ENOMEM;
    json_object_foreach (old, k, v)
        if (!json_object_get(status, k) && json_object_set_new(diff, k, json_null()) < 0)
            return -ENOMEM;
    if (!json_object_size(diff))
        return 0;
    _cleanup_json_ json_t *patch = json_pack("{s:O}", "status", diff);
    if (!patch)
        return -ENOMEM;
    return kube_patch(c->ctl, KR_SANDBOX, c->sb, "status", patch, false, NULL);
}

/* The errors joined by ", " (owned), or NULL when there are none or on ENOMEM. */
static char *joined_errors(sbx *c)
{
    _cleanup_buf_ buf b = BUF_INIT;
    size_t i;
    json_t *e;
    json_array_foreach (c->errors, i, e)
        if ((i && buf_append_str(&b, ", ") < 0) || buf_append_str(&b, json_string_value(e)) < 0)
            return NULL;
    if (c->oom && buf_appendf(&b, "%sout of memory", b.len ? ", " : "") < 0)
        return NULL;
    return buf_steal(&b, NULL);
}

/* The desired status of the Sandbox from what this reconcile found (pod NULL: none owned). */
static int sandbox_status(sbx *c, const json_t *pod, pod_state ps, size_t n_pods, bool svc_tracked,
                          reconcile_sandbox_out *out)
{
    _cleanup_json_ json_t *ips = pod ? pod_ips(pod) : NULL;
    _cleanup_free_ char *errors = has_errors(c) ? joined_errors(c) : NULL, *fqdn = NULL;
    if ((pod && !ips) || (has_errors(c) && !errors))
        return -ENOMEM;
    if (svc_tracked &&
        asprintf(&fqdn, "%s.%s.svc.%s", c->name, c->ns, c->ctl->opt.cluster_domain) < 0) {
        fqdn = NULL;
        return -ENOMEM;
    }
    const json_t *ready = reconcile_condition(pod, "Ready");
    reconcile_sandbox_in in = {
        .sandbox = c->sb,
        .now = (int64_t)now_usec(CLOCK_REALTIME),
        .observed = {.pod = pod != NULL,
                     .owned_pods = ps == POD_MULTIPLE ? n_pods : pod != NULL,
                     .phase = kube_str(pod, "status.phase"),
                     .pod_ready = strcmp(json_string_value(json_object_get(ready, "status")) ?: "",
                                         "True") == 0,
                     .pod_not_owned = ps == POD_NOT_OWNED,
                     .pod_ips = ips,
                     .node_name = kube_str(pod, "spec.nodeName"),
                     .pod_scheduled = reconcile_condition(pod, "PodScheduled"),
                     .service = svc_tracked,
                     .service_fqdn = fqdn,
                     .error = errors},
    };
    return reconcile_sandbox_status(&in, out);
}

/* ---- expiry (§2.4.6): the decision is the core's; the cleanup deletes pod and Service ---- */
static int expire_children(sbx *c)
{
    const char *pn = annotation(c->sb, RECONCILE_ANN_POD_NAME);
    _cleanup_json_ json_t *pod =
        kube_informer_get(&c->ctl->inf[KR_POD], c->ns, pn && *pn ? pn : c->name);
    int e = 0;
    if (pod && reconcile_controlled_by(pod, c->sb) && !reconcile_deleting(pod))
        e = kube_delete(c->ctl, KR_POD, pod, NULL);
    _cleanup_json_ json_t *svc = kube_informer_get(&c->ctl->inf[KR_SERVICE], c->ns, c->name);
    if (e == 0 && svc && reconcile_controlled_by(svc, c->sb))
        e = kube_delete(c->ctl, KR_SERVICE, svc, NULL);
    return e;
}

/* Returns true when the reconcile is over (expired). */
static bool reconcile_expiry(sbx *c, int64_t *ret_requeue, int *ret_err)
{
    reconcile_sandbox_in in = {.sandbox = c->sb, .now = (int64_t)now_usec(CLOCK_REALTIME)};
    _cleanup_(reconcile_sandbox_out_done) reconcile_sandbox_out out = {0};
    int e = reconcile_sandbox_expiry(&in, &out);
    if (e < 0) {
        *ret_err = e;
        return true;
    }
    if (out.requeue)
        *ret_requeue = out.requeue;
    switch (out.action) {
    case RECONCILE_SANDBOX_RUN:
        return false;
    case RECONCILE_SANDBOX_EXPIRE_MARK:
        *ret_err = out.status_changed ? write_status(c, out.status) : 0;
        if (out.status_changed && *ret_err == 0)
            kube_event(c->ctl, c->sb, "Normal", "Expired", "spec.shutdownTime passed");
        return true;
    case RECONCILE_SANDBOX_EXPIRE_DELETE:
    case RECONCILE_SANDBOX_EXPIRE_RETAIN:
        break;
    }
    e = expire_children(c);
    if (e < 0)
        *ret_err = e;
    else if (out.action == RECONCILE_SANDBOX_EXPIRE_DELETE) {
        log_info("sandbox expired: deleting", "namespace", c->ns, "sandbox", c->name);
        *ret_err = kube_delete(c->ctl, KR_SANDBOX, c->sb, NULL);
    } else
        *ret_err = out.status_changed ? write_status(c, out.status) : 0;
    return true;
}

/* Creation latency: the first time this controller sees the sandbox Ready. */
static void observe_first_ready(kube_ctl *ctl, const json_t *sb)
{
    const char *uid = kube_str(sb, "metadata.uid");
    pthread_mutex_lock(&ctl->exp_lock);
    bool first = uid && !json_object_get(ctl->seen_ready, uid) &&
                 json_object_set_new(ctl->seen_ready, uid, json_true()) == 0;
    pthread_mutex_unlock(&ctl->exp_lock);
    int64_t created;
    if (first && reconcile_parse_time(kube_str(sb, "metadata.creationTimestamp"), &created) == 0)
        kube_metrics_observe_creation(
            ctl, (double)((int64_t)now_usec(CLOCK_REALTIME) - created) / 1000.0);
}

/* The pod-name annotation changes collected in c->ann, as one merge patch of the Sandbox. */
static void write_annotations(sbx *c)
{
    json_t *cur = jget(c->sb, "metadata", "annotations");
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe (c->ann, tmp, k, v) {
        if (json_equal(json_object_get(cur, k), v) || (json_is_null(v) && !json_object_get(cur, k)))
            json_object_del(c->ann, k);
    }
    if (!json_object_size(c->ann))
        return;
    _cleanup_json_ json_t *patch = json_pack("{s:{s:O}}", "metadata", "annotations", c->ann);
    int e = patch ? kube_patch(c->ctl, KR_SANDBOX, c->sb, NULL, patch, false, NULL) : -ENOMEM;
    if (e < 0 && e != -ENOENT)
        add_error(c, "annotate sandbox: %s", strerror(-e));
}

int kube_reconcile_sandbox(kube_ctl *ctl, const char *ns, const char *name, int64_t *ret_requeue)
{
    _cleanup_json_ json_t *sb = kube_informer_get(&ctl->inf[KR_SANDBOX], ns, name);
    if (!sb || reconcile_deleting(sb))
        return 0;
    _cleanup_json_ json_t *errors = json_array(), *ann = json_object();
    if (!errors || !ann)
        return -ENOMEM;
    sbx c = {.ctl = ctl, .sb = sb, .ns = ns, .name = name, .errors = errors, .ann = ann};
    reconcile_name_hash(name, c.hash);
    int err = 0;
    if (reconcile_expiry(&c, ret_requeue, &err))
        return err;
    bool suspended = reconcile_sandbox_suspended(sb);
    reconcile_pvcs(&c);
    pod_state ps = POD_NONE;
    size_t n_pods = 0;
    _cleanup_json_ json_t *pod = has_errors(&c) ? NULL : reconcile_pod(&c, suspended, &ps, &n_pods);
    if (has_errors(&c) && !pod)
        ps = POD_NONE;
    bool svc = ps == POD_MULTIPLE ? false : reconcile_service(&c);
    if (ps == POD_MULTIPLE) {
        _cleanup_json_ json_t *s = kube_informer_get(&ctl->inf[KR_SERVICE], ns, name);
        svc = s && reconcile_controlled_by(s, sb);
    }
    /* Sandbox annotations (pod-name) before status. */
    write_annotations(&c);
    _cleanup_(reconcile_sandbox_out_done) reconcile_sandbox_out out = {0};
    err = sandbox_status(&c, ps == POD_MULTIPLE ? NULL : pod, ps, n_pods, svc, &out);
    if (err == 0 && out.status_changed)
        err = write_status(&c, out.status);
    if (err == -ENOENT)
        err = 0;
    if (ps == POD_MULTIPLE && err == 0) {
        const char *was =
            json_string_value(json_object_get(reconcile_condition(sb, "Ready"), "reason"));
        /* Ready is the first condition of the status the core made. */
        const json_t *now = json_array_get(json_object_get(out.status, "conditions"), 0);
        if (!was || strcmp(was, "MultiplePods") != 0)
            kube_event(ctl, sb, "Warning", "MultiplePods",
                       json_string_value(json_object_get(now, "message")));
    }
    if (out.ready && err == 0)
        observe_first_ready(ctl, sb);
    if (has_errors(&c) && err == 0) {
        log_warn("sandbox reconcile error", "namespace", ns, "sandbox", name, "error",
                 json_string_value(json_array_get(c.errors, 0)) ?: "out of memory");
        err = -EAGAIN;
    }
    return err;
}
