/* The typed pod spec (api-pod.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-pod.h"
#include "basic/macro.h"
#include "basic/parse-util.h"

static const char *const resource_names[API_RESOURCE_COUNT] = {
    [API_RESOURCE_MEMORY] = "memory",
    [API_RESOURCE_CPU] = "cpu",
    [API_RESOURCE_EPHEMERAL_STORAGE] = "ephemeral-storage",
};

const char *api_resource_name(api_resource r)
{
    return r < API_RESOURCE_COUNT ? resource_names[r] : NULL;
}

int api_quantity_parse(const char *s, api_resource r, int64_t *ret)
{
    long double v;
    if (!s || parse_quantity(s, &v) < 0 || v < 0)
        return -EINVAL;
    v *= r == API_RESOURCE_CPU ? 1000.0L : 1.0L;
    if (v > 9.2e18L)
        return -EINVAL;
    *ret = (int64_t)(v + 0.5L);
    return 0;
}

const json_t *api_pod_spec_of(const json_t *obj)
{
    return json_object_get(json_object_get(json_object_get(obj, "spec"), "podTemplate"), "spec");
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static const json_t *array(const json_t *o, const char *key)
{
    const json_t *a = json_object_get(o, key);
    return json_is_array(a) ? a : NULL;
}

/* One resource list (limits or requests): the three resources counted; others are left alone. */
static int parse_resources(const json_t *list, const char *path, api_errors *errs,
                           api_resource_list *ret)
{
    int k = 0;
    for (api_resource r = 0; r < API_RESOURCE_COUNT; r++) {
        const json_t *v = json_object_get(list, resource_names[r]);
        if (!v)
            continue;
        api_quantity *q = &ret->q[r];
        char text[64];
        if (json_is_integer(v))
            snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else if (json_is_real(
                     v)) /* stored before admission refused numbers that are not integers */
            snprintf(text, sizeof(text), "%.17g", json_real_value(v));
        else
            snprintf(text, sizeof(text), "%s", json_string_value(v) ? json_string_value(v) : "");
        snprintf(q->text, sizeof(q->text), "%.*s", (int)sizeof(q->text) - 1, text);
        if (api_quantity_parse(text, r, &q->value) == 0) {
            q->set = true;
            continue;
        }
        k = -EINVAL;
        if (!errs)
            continue;
        long double d;
        bool negative = parse_quantity(text, &d) == 0 && d < 0;
        _cleanup_free_ char *field = NULL;
        if (asprintf(&field, "%s.%s", path, resource_names[r]) < 0)
            return -ENOMEM;
        if (!api_errors_has_field(errs, field))
            api_errors_add(errs, API_FIELD_INVALID, field, v, "%s",
                           negative ? "must be greater than or equal to 0"
                                    : "unable to parse quantity's suffix");
    }
    return k;
}

static void user_of(const json_t *sc, int64_t *uid, int64_t *gid)
{
    const json_t *u = json_object_get(sc, "runAsUser"), *g = json_object_get(sc, "runAsGroup");
    *uid = json_is_integer(u) && json_integer_value(u) >= 0 ? json_integer_value(u) : -1;
    *gid = json_is_integer(g) && json_integer_value(g) >= 0 ? json_integer_value(g) : -1;
}

static int parse_container(const json_t *c, const char *path, api_errors *errs, api_container *ret)
{
    ret->json = c;
    ret->name = str(c, "name");
    ret->image = str(c, "image");
    ret->working_dir = str(c, "workingDir");
    ret->command = array(c, "command");
    ret->args = array(c, "args");
    ret->env = array(c, "env");
    user_of(json_object_get(c, "securityContext"), &ret->run_as_user, &ret->run_as_group);
    const json_t *res = json_object_get(c, "resources");
    _cleanup_free_ char *lp = NULL, *rp = NULL;
    if (asprintf(&lp, "%s.resources.limits", path) < 0 ||
        asprintf(&rp, "%s.resources.requests", path) < 0)
        return -ENOMEM;
    int k1 = parse_resources(json_object_get(res, "limits"), lp, errs, &ret->limits);
    int k2 = parse_resources(json_object_get(res, "requests"), rp, errs, &ret->requests);
    if (k1 == -ENOMEM || k2 == -ENOMEM)
        return -ENOMEM;
    const json_t *mounts = array(c, "volumeMounts");
    size_t n = json_array_size(mounts);
    if (n && !(ret->mounts = calloc(n, sizeof(*ret->mounts))))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(mounts, i);
        const char *sub = str(m, "subPath");
        ret->mounts[ret->n_mounts++] = (api_volume_mount){
            .name = str(m, "name"),
            .mount_path = str(m, "mountPath"),
            .sub_path = sub && *sub ? sub : NULL,
            .read_only = json_is_true(json_object_get(m, "readOnly")),
        };
    }
    return k1 < 0 ? k1 : k2;
}

static int parse_list(const json_t *pod, const char *key, const char *path, api_errors *errs,
                      api_container **ret, size_t *ret_n)
{
    const json_t *list = array(pod, key);
    size_t n = json_array_size(list);
    if (n && !(*ret = calloc(n, sizeof(**ret))))
        return -ENOMEM;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *p = NULL;
        if (asprintf(&p, "%s.%s[%zu]", path, key, i) < 0)
            return -ENOMEM;
        (*ret_n)++;
        int r = parse_container(json_array_get(list, i), p, errs, &(*ret)[i]);
        if (r == -ENOMEM)
            return r;
        if (r < 0)
            k = r;
    }
    return k;
}

int api_pod_parse(const json_t *pod_spec, const char *path, api_errors *errs, api_pod **ret)
{
    api_pod *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->json = pod_spec ? json_incref((json_t *)pod_spec) : json_object();
    p->runtime_class_name = str(pod_spec, "runtimeClassName");
    user_of(json_object_get(pod_spec, "securityContext"), &p->run_as_user, &p->run_as_group);
    int k1 = parse_list(pod_spec, "containers", path, errs, &p->containers, &p->n_containers);
    int k2 = k1 == -ENOMEM ? k1
                           : parse_list(pod_spec, "initContainers", path, errs, &p->init_containers,
                                        &p->n_init_containers);
    if (!p->json || k1 < 0 || k2 < 0) {
        int k = !p->json || k1 == -ENOMEM || k2 == -ENOMEM ? -ENOMEM : -EINVAL;
        api_pod_free(p);
        return k;
    }
    *ret = p;
    return 0;
}

static void free_containers(api_container *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(c[i].mounts);
    free(c);
}

api_pod *api_pod_free(api_pod *p)
{
    if (!p)
        return NULL;
    free_containers(p->containers, p->n_containers);
    free_containers(p->init_containers, p->n_init_containers);
    json_decref(p->json);
    free(p);
    return NULL;
}
