/* SandboxSnapshots and forks (include/asb/snapshot.h). */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asb/snapshot.h"
#include "basic/time-util.h"
#include "libasb/libasb-internal.h"

#define KIND "SandboxSnapshot"
#define DEFAULT_READY_TIMEOUT_MS 180000L
#define WAIT_MET 1

static const json_t *ready_of(const json_t *obj)
{
    const json_t *c;
    size_t i;
    json_array_foreach (json_object_get(json_object_get(obj, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, "Ready") == 0)
            return c;
    }
    return NULL;
}

typedef struct ready_wait {
    const char *kind, *name;
    char *object; /* the Ready object's JSON, owned */
    char last[512];
} ready_wait;

/* Ready True: met. A snapshot's Ready False is final unless it waits for its sandbox to start;
 * a Sandbox's Ready False is a step on the way (a start takes a while). */
static int on_event(const char *type, const char *object_json, void *payload)
{
    ready_wait *w = payload;
    if (strcmp(type, "DELETED") == 0)
        return asbi_error_set(ASB_ENOTFOUND, 0, "NotFound", "%s %s was deleted while waiting",
                              w->kind, w->name);
    if (strcmp(type, "ADDED") != 0 && strcmp(type, "MODIFIED") != 0)
        return 0;
    json_t *obj = json_loads(object_json, 0, NULL);
    const json_t *c = ready_of(obj);
    const char *status = json_string_value(json_object_get(c, "status")),
               *reason = json_string_value(json_object_get(c, "reason")),
               *msg = json_string_value(json_object_get(c, "message"));
    int r = 0;
    if (c)
        snprintf(w->last, sizeof(w->last), "Ready=%s %s: %s", status ? status : "",
                 reason ? reason : "", msg ? msg : "");
    if (status && strcmp(status, "True") == 0) {
        free(w->object);
        w->object = strdup(object_json);
        r = w->object ? WAIT_MET : asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    } else if (status && strcmp(w->kind, KIND) == 0 && strcmp(status, "False") == 0 && reason &&
               strcmp(reason, "SandboxNotStarted") != 0)
        r = asbi_error_set(ASB_ERROR, 0, reason, "snapshot %s failed: %s: %s", w->name, reason,
                           msg ? msg : "");
    json_decref(obj);
    return r;
}

/* Watches kind/name of ns until Ready (its current state first). *out (may be NULL) the object. */
static int wait_ready(char **out, asb_client *c, const char *kind, const char *ns, const char *name,
                      long timeout_ms, const volatile int *cancel)
{
    ready_wait w = {.kind = kind, .name = name};
    long long deadline = now_msec(CLOCK_MONOTONIC) + timeout_ms;
    int r;
    for (;;) {
        long left = (long)(deadline - now_msec(CLOCK_MONOTONIC));
        if (left <= 0) {
            r = ASB_ETIMEOUT;
            break;
        }
        asb_watch_options wo = ASB_WATCH_OPTIONS_INIT;
        wo.name = name;
        wo.timeout_ms = left;
        wo.cancel = cancel;
        r = asb_object_watch(c, kind, ns, &wo, on_event, &w);
        if (r != ASB_OK && r != ASB_EEXPIRED)
            break; /* ASB_OK: the server ended the stream; watch again */
    }
    if (r == WAIT_MET) {
        if (out)
            *out = w.object;
        else
            free(w.object);
        return ASB_OK;
    }
    free(w.object);
    if (r == ASB_ETIMEOUT)
        return asbi_error_set(ASB_ETIMEOUT, 0, NULL, "%s %s/%s not Ready after %ld ms (%s)", kind,
                              ns, name, timeout_ms, w.last[0] ? w.last : "no condition yet");
    return r;
}

static const char *name_of(const json_t *obj)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

ASB_PUBLIC int asb_snapshot_create(char **out, asb_client *client, const char *ns,
                                   const char *sandbox, const asb_snapshot_options *o)
{
    if (out)
        *out = NULL;
    if (!client || !sandbox || !*sandbox)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_snapshot_create: NULL client or sandbox");
    if (o && o->version != ASB_SNAPSHOT_OPTIONS_VERSION)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_snapshot_options: unknown version %u",
                              o->version);
    ns = ns && *ns ? ns : "default";
    char gen[300];
    snprintf(gen, sizeof(gen), "%.240s-snap-", sandbox);
    json_t *body =
        json_pack("{s:s,s:s,s:{},s:{s:{s:s}}}", "apiVersion", "extensions.agents.x-k8s.io/v1beta1",
                  "kind", KIND, "metadata", "spec", "sandboxRef", "name", sandbox);
    json_t *md = json_object_get(body, "metadata");
    char *text = NULL;
    if (!md ||
        json_object_set_new(md, o && o->name ? "name" : "generateName",
                            json_string(o && o->name ? o->name : gen)) < 0 ||
        !(text = json_dumps(body, JSON_COMPACT))) {
        json_decref(body);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    json_decref(body);
    char *created = NULL;
    int r = asb_object_create(&created, client, KIND, ns, text);
    free(text);
    if (r != ASB_OK || !o || o->wait_ms <= 0) {
        if (out)
            *out = created;
        else
            asb_free(created);
        return r;
    }
    json_t *obj = json_loads(created, 0, NULL);
    asb_free(created);
    const char *name = name_of(obj);
    r = name ? wait_ready(out, client, KIND, ns, name, o->wait_ms, o->cancel)
             : asbi_error_set(ASB_EPROTOCOL, 0, NULL, "created snapshot has no name");
    json_decref(obj);
    return r;
}

ASB_PUBLIC int asb_snapshot_get(char **out, asb_client *client, const char *ns, const char *name)
{
    return asb_object_get(out, client, KIND, ns && *ns ? ns : "default", name);
}

ASB_PUBLIC int asb_snapshot_list(char **out, asb_client *client, const char *ns)
{
    return asb_object_list(out, client, KIND, ns && *ns ? ns : "default", NULL);
}

ASB_PUBLIC int asb_snapshot_delete(asb_client *client, const char *ns, const char *name)
{
    return asb_object_delete(NULL, client, KIND, ns && *ns ? ns : "default", name);
}

#define ANN_FORKED_FROM "agents.x-k8s.io/forked-from"
#define ANN_FORK_SNAPSHOT "agents.x-k8s.io/fork-snapshot"
#define LABEL_FORK_OF "agents.x-k8s.io/fork-of"

/* Whether s is a valid label value (63 characters at most, alphanumerics at both ends). */
static bool label_value_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
            return false;
    }
    return true;
}

/* The controlling SandboxClaim of sb, or NULL (borrowed). */
static const json_t *controller_claim_ref(const json_t *sb)
{
    const json_t *ref;
    size_t i;
    json_array_foreach (json_object_get(json_object_get(sb, "metadata"), "ownerReferences"), i,
                        ref) {
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        if (kind && strcmp(kind, "SandboxClaim") == 0 &&
            json_is_true(json_object_get(ref, "controller")))
            return ref;
    }
    return NULL;
}

/* What every fork of `source` (may be NULL) from snapshot snap carries, as a merge patch of its
 * manifest: lineage labels and annotations and, when a claim controls the source, the claim's
 * lifecycle and an ownerReference to it. *out new; ASB_OK or an error (the claim or the source
 * could not be read: a fork must not silently outlive what the user set). */
static int fork_lineage(json_t **out, asb_client *client, const char *ns, const char *source,
                        const json_t *snap)
{
    const char *from = source ? source
                              : json_string_value(json_object_get(
                                    json_object_get(json_object_get(snap, "status"), "source"),
                                    "sandbox"));
    json_t *l = json_pack("{s:{s:{}, s:{s:s}}, s:{}}", "metadata", "labels", "annotations",
                          ANN_FORK_SNAPSHOT, name_of(snap) ? name_of(snap) : "", "spec");
    if (!l)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    json_t *md = json_object_get(l, "metadata");
    if (from) {
        json_object_set_new(json_object_get(md, "annotations"), ANN_FORKED_FROM, json_string(from));
        if (label_value_ok(from))
            json_object_set_new(json_object_get(md, "labels"), LABEL_FORK_OF, json_string(from));
    }
    *out = l;
    if (!source)
        return ASB_OK;
    char *text = NULL;
    int r = asb_object_get(&text, client, "Sandbox", ns, source);
    json_t *sb = r == ASB_OK ? json_loads(text, 0, NULL) : NULL;
    asb_free(text);
    const json_t *ref = controller_claim_ref(sb);
    const char *claim = json_string_value(json_object_get(ref, "name"));
    if (r == ASB_OK && claim) {
        r = asb_object_get(&text, client, "SandboxClaim", ns, claim);
        json_t *cl = r == ASB_OK ? json_loads(text, 0, NULL) : NULL;
        asb_free(text);
        const json_t *lc = json_object_get(json_object_get(cl, "spec"), "lifecycle");
        const char *when = json_string_value(json_object_get(lc, "shutdownTime")),
                   *policy = json_string_value(json_object_get(lc, "shutdownPolicy"));
        json_t *own = json_pack("[{s:s,s:s,s:s,s:s}]", "apiVersion",
                                "extensions.agents.x-k8s.io/v1beta1", "kind", "SandboxClaim",
                                "name", claim, "uid",
                                json_string_value(json_object_get(cl ? json_object_get(cl, "metadata")
                                                                     : NULL,
                                                                  "uid")) ?: "");
        if (r == ASB_OK && (!own || json_object_set_new(md, "ownerReferences", own) < 0))
            r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        if (r == ASB_OK && when) {
            json_t *spec = json_object_get(l, "spec");
            json_object_set_new(spec, "shutdownTime", json_string(when));
            json_object_set_new(spec, "shutdownPolicy",
                                json_string(policy && strcmp(policy, "Retain") == 0 ? "Retain"
                                                                                    : "Delete"));
        }
        json_decref(cl);
    }
    json_decref(sb);
    if (r != ASB_OK) {
        json_decref(l);
        *out = NULL;
    }
    return r;
}

/* The Sandbox a fork is: the source's pod template (recorded by the snapshot) with every
 * container's image `snapshot:NAME`, its volume claim templates, and its lineage (merged in).
 * Owned JSON text. */
static char *fork_manifest(const json_t *snap, const char *name, const char *generate,
                           const json_t *lineage)
{
    const json_t *src = json_object_get(json_object_get(snap, "status"), "source");
    json_t *pt = json_deep_copy(json_object_get(src, "podTemplate")), *c;
    char image[300];
    snprintf(image, sizeof(image), "snapshot:%s", name_of(snap));
    size_t i;
    json_array_foreach (json_object_get(json_object_get(pt, "spec"), "containers"), i, c)
        json_object_set_new(c, "image", json_string(image));
    json_t *spec = json_pack("{s:o*}", "podTemplate", pt);
    if (spec && json_object_get(src, "volumeClaimTemplates"))
        json_object_set(spec, "volumeClaimTemplates", json_object_get(src, "volumeClaimTemplates"));
    json_t *body = json_pack("{s:s,s:s,s:{s:s},s:o*}", "apiVersion", "agents.x-k8s.io/v1beta1",
                             "kind", "Sandbox", "metadata", generate ? "generateName" : "name",
                             generate ? generate : name, "spec", spec);
    if (body && lineage &&
        (json_object_update(json_object_get(body, "metadata"),
                            json_object_get(lineage, "metadata")) < 0 ||
         json_object_update(json_object_get(body, "spec"), json_object_get(lineage, "spec")) < 0)) {
        json_decref(body);
        body = NULL;
    }
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    return text;
}

/* The snapshot made for these forks is theirs: the last one's deletion takes it (a failure
 * leaves it as it was, logged: the forks are there and Ready). */
static void own_snapshot(asb_client *client, const char *ns, const char *snap, json_t *owners)
{
    json_t *patch = json_pack("{s:{s:O}}", "metadata", "ownerReferences", owners);
    char *text = patch ? json_dumps(patch, JSON_COMPACT) : NULL;
    json_decref(patch);
    if (!text || asb_object_patch(NULL, client, KIND, ns, snap, text, 0) != ASB_OK)
        asbi_log(client, ASB_LOG_WARNING, "cannot make snapshot %s owned by its forks: %s", snap,
                 text ? asb_error_last()->message : "out of memory");
    free(text);
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Makes and waits for the forks; on failure deletes what it made. */
static int make_forks(char ***out, size_t *out_n, asb_client *client, const char *ns,
                      const json_t *snap, const char *source, const json_t *lineage,
                      json_t *owners, const asb_fork_options *o, long long deadline)
{
    unsigned count = o && o->count > 0 ? o->count : 1;
    char **names = calloc(count, sizeof(char *)), gen[300];
    snprintf(gen, sizeof(gen), "%.240s-fork-", source ? source : name_of(snap));
    if (!names)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    size_t made = 0;
    int r = ASB_OK;
    for (unsigned i = 0; r == ASB_OK && i < count; i++) {
        char nm[300], *text, *created = NULL;
        if (o && o->name)
            snprintf(nm, sizeof(nm), count == 1 ? "%s" : "%s-%u", o->name, i + 1);
        text = fork_manifest(snap, o && o->name ? nm : NULL, o && o->name ? NULL : gen, lineage);
        if (!text)
            return free_names(names, made), asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        r = asb_object_create(&created, client, "Sandbox", ns, text);
        free(text);
        json_t *obj = r == ASB_OK ? json_loads(created, 0, NULL) : NULL;
        asb_free(created);
        if (r == ASB_OK && !(names[made] = name_of(obj) ? strdup(name_of(obj)) : NULL))
            r = asbi_error_set(ASB_EPROTOCOL, 0, NULL, "created sandbox has no name");
        if (r == ASB_OK &&
            json_array_append_new(
                owners, json_pack("{s:s,s:s,s:s,s:s}", "apiVersion", "agents.x-k8s.io/v1beta1",
                                  "kind", "Sandbox", "name", names[made], "uid",
                                  json_string_value(json_object_get(
                                      json_object_get(obj, "metadata"), "uid")) ?: "")) < 0)
            r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        made += r == ASB_OK;
        json_decref(obj);
    }
    for (size_t i = 0; r == ASB_OK && i < made; i++) {
        long left = (long)(deadline - now_msec(CLOCK_MONOTONIC));
        r = left > 0 ? wait_ready(NULL, client, "Sandbox", ns, names[i], left, o ? o->cancel : NULL)
                     : asbi_error_set(ASB_ETIMEOUT, 0, NULL, "forks not Ready in time");
    }
    if (r != ASB_OK) {
        const asb_error *e = asb_error_last();
        char *msg = e && e->message ? strdup(e->message) : NULL;
        char *reason = e && e->reason && *e->reason ? strdup(e->reason) : NULL;
        int http = e ? e->http_status : 0;
        for (size_t i = 0; i < made; i++)
            asb_object_delete(NULL, client, "Sandbox", ns, names[i]);
        asbi_error_set(r, http, reason, "%s (snapshot %s kept)", msg ? msg : asb_strerror(r),
                       name_of(snap));
        free(msg);
        free(reason);
        free_names(names, made);
        return r;
    }
    *out = names;
    *out_n = made;
    return ASB_OK;
}

ASB_PUBLIC int asb_fork(char ***out_names, size_t *out_n, asb_client *client, const char *ns,
                        const char *sandbox, const asb_fork_options *o)
{
    if (!out_names || !out_n || !client || ((!sandbox || !*sandbox) && !(o && o->snapshot)))
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "asb_fork: NULL out, client, or sandbox without a snapshot");
    if (o && (o->version < 1 || o->version > ASB_FORK_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_fork_options: unknown version %u",
                              o->version);
    bool own = !(o && o->snapshot) || (o->version >= 2 && o->own_snapshot);
    *out_names = NULL;
    *out_n = 0;
    ns = ns && *ns ? ns : "default";
    long tmo = o && o->ready_timeout_ms > 0 ? o->ready_timeout_ms : DEFAULT_READY_TIMEOUT_MS;
    long long deadline = now_msec(CLOCK_MONOTONIC) + tmo;
    char *text = NULL;
    int r;
    if (o && o->snapshot)
        r = wait_ready(&text, client, KIND, ns, o->snapshot, tmo, o->cancel);
    else {
        asb_snapshot_options so = ASB_SNAPSHOT_OPTIONS_INIT;
        so.wait_ms = tmo;
        so.cancel = o ? o->cancel : NULL;
        r = asb_snapshot_create(&text, client, ns, sandbox, &so);
    }
    if (r != ASB_OK)
        return r;
    json_t *snap = json_loads(text, 0, NULL);
    free(text);
    if (!snap || !json_object_get(json_object_get(json_object_get(snap, "status"), "source"),
                                  "podTemplate")) {
        json_decref(snap);
        return asbi_error_set(ASB_EPROTOCOL, 0, NULL,
                              "the snapshot records no source pod template to fork");
    }
    json_t *lineage = NULL, *owners = json_array();
    r = owners ? fork_lineage(&lineage, client, ns, sandbox && *sandbox ? sandbox : NULL, snap)
               : asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    if (r == ASB_OK)
        r = make_forks(out_names, out_n, client, ns, snap, sandbox, lineage, owners, o, deadline);
    if (r == ASB_OK && own)
        own_snapshot(client, ns, name_of(snap), owners);
    json_decref(lineage);
    json_decref(owners);
    json_decref(snap);
    return r;
}
