/* The kinds' specs as typed values (api-objects.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/api-objects.h"
#include "basic/buf.h"

static const json_t *obj_at(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_object(v) ? v : NULL;
}

static const char *str_at(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static int64_t int_at(const json_t *o, const char *key, int64_t unset)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : unset;
}

static const json_t *array_at(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_array(v) ? v : NULL;
}

int api_pod_template_parse(const json_t *pod_template, const char *path, api_errors *errs,
                           api_pod_template *ret)
{
    const json_t *md = obj_at(pod_template, "metadata");
    *ret = (api_pod_template){
        .json = json_is_object(pod_template) ? pod_template : NULL,
        .labels = obj_at(md, "labels"),
        .annotations = obj_at(md, "annotations"),
    };
    _cleanup_free_ char *spec_path = strdup_printf("%s.spec", path ? path : API_POD_TEMPLATE);
    if (!spec_path)
        return -ENOMEM;
    return api_pod_parse(obj_at(pod_template, "spec"), spec_path, errs, &ret->pod);
}

void api_pod_template_done(api_pod_template *t)
{
    t->pod = api_pod_free(t->pod);
}

int api_sandbox_spec_parse(const json_t *obj, api_errors *errs, api_sandbox_spec **ret)
{
    _cleanup_(api_sandbox_spec_freep) api_sandbox_spec *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->json = json_incref((json_t *)obj);
    const json_t *spec = obj_at(obj, "spec");
    int r = api_pod_template_parse(api_pod_template_json(spec), "spec." API_POD_TEMPLATE, errs,
                                   &s->pod_template);
    if (r < 0)
        return r;
    s->volume_claim_templates = array_at(spec, "volumeClaimTemplates");
    s->shutdown_time = str_at(spec, "shutdownTime");
    s->shutdown_policy = str_at(spec, "shutdownPolicy");
    s->operating_mode = str_at(spec, "operatingMode");
    s->replicas = int_at(spec, "replicas", -1);
    s->service = json_is_true(json_object_get(spec, "service"));
    *ret = TAKE_PTR(s);
    return 0;
}

int api_template_spec_parse(const json_t *obj, api_errors *errs, api_template_spec **ret)
{
    _cleanup_(api_template_spec_freep) api_template_spec *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->json = json_incref((json_t *)obj);
    const json_t *spec = obj_at(obj, "spec");
    int r = api_pod_template_parse(api_pod_template_json(spec), "spec." API_POD_TEMPLATE, errs,
                                   &s->pod_template);
    if (r < 0)
        return r;
    s->volume_claim_templates = array_at(spec, "volumeClaimTemplates");
    s->network_policy = obj_at(spec, "networkPolicy");
    s->network_policy_management = str_at(spec, "networkPolicyManagement");
    s->env_vars_injection_policy = str_at(spec, "envVarsInjectionPolicy");
    s->volume_claim_templates_policy = str_at(spec, "volumeClaimTemplatesPolicy");
    s->service = json_is_true(json_object_get(spec, "service"));
    *ret = TAKE_PTR(s);
    return 0;
}

int api_claim_spec_parse(const json_t *obj, api_claim_spec **ret)
{
    api_claim_spec *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->json = json_incref((json_t *)obj);
    const json_t *spec = obj_at(obj, "spec"), *lc = obj_at(spec, "lifecycle"),
                 *md = obj_at(spec, "additionalPodMetadata");
    s->template_ref = api_template_ref(obj);
    s->warm_pool_ref = api_warm_pool_ref(obj);
    s->shutdown_time = str_at(lc, "shutdownTime");
    s->shutdown_policy = str_at(lc, "shutdownPolicy");
    s->has_ttl = json_is_integer(json_object_get(lc, "ttlSecondsAfterFinished"));
    s->ttl_seconds_after_finished = int_at(lc, "ttlSecondsAfterFinished", 0);
    s->labels = obj_at(md, "labels");
    s->annotations = obj_at(md, "annotations");
    s->env = array_at(spec, "env");
    s->volume_claim_templates = array_at(spec, "volumeClaimTemplates");
    *ret = s;
    return 0;
}

int api_warmpool_spec_parse(const json_t *obj, api_warmpool_spec **ret)
{
    api_warmpool_spec *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->json = json_incref((json_t *)obj);
    const json_t *spec = obj_at(obj, "spec");
    s->template_ref = api_template_ref(obj);
    s->replicas = int_at(spec, "replicas", 1);
    s->update_strategy = str_at(obj_at(spec, "updateStrategy"), "type");
    *ret = s;
    return 0;
}

api_sandbox_spec *api_sandbox_spec_free(api_sandbox_spec *s)
{
    if (!s)
        return NULL;
    api_pod_template_done(&s->pod_template);
    json_decref(s->json);
    free(s);
    return NULL;
}

api_template_spec *api_template_spec_free(api_template_spec *s)
{
    if (!s)
        return NULL;
    api_pod_template_done(&s->pod_template);
    json_decref(s->json);
    free(s);
    return NULL;
}

api_claim_spec *api_claim_spec_free(api_claim_spec *s)
{
    if (s)
        json_decref(s->json);
    free(s);
    return NULL;
}

api_warmpool_spec *api_warmpool_spec_free(api_warmpool_spec *s)
{
    if (s)
        json_decref(s->json);
    free(s);
    return NULL;
}
