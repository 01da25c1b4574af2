/* The core Kubernetes types a kind embeds, checked the way asb serve does (a subset of
 * kube-apiserver's Pod, PVC and NetworkPolicy validation), and the checks of single values the
 * generic validator (api-validate.c) shares. Messages follow k8s field.Error. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api-pod.h"
#include "api/api-spec.h"
#include "basic/macro.h"
#include "basic/path-util.h"

#define PATH_MAX_LEN 512

/* Field paths are built in fixed stack buffers; paths are ours (not user input) except for
 * indices, so truncation cannot happen in practice and would only shorten a message. */
typedef struct fpath {
    char s[PATH_MAX_LEN];
} fpath;

static fpath fp(const char *base, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static fpath fp(const char *base, const char *fmt, ...)
{
    fpath p;
    size_t n = (size_t)snprintf(p.s, sizeof(p.s), "%s", base);
    if (n < sizeof(p.s)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p.s + n, sizeof(p.s) - n, fmt, ap);
        va_end(ap);
    }
    return p;
}

const char *api_json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

/* Structural schema type check: absent (NULL) is fine. Returns true when v is usable. */
bool api_want_type(api_errors *e, const char *field, const json_t *v, json_type t)
{
    if (!v)
        return false;
    bool ok = json_typeof(v) == t || (t == JSON_TRUE && json_is_boolean(v));
    if (ok)
        return true;
    api_type_error(e, field, v,
                   t == JSON_OBJECT    ? "object"
                   : t == JSON_ARRAY   ? "array"
                   : t == JSON_STRING  ? "string"
                   : t == JSON_INTEGER ? "integer"
                                       : "boolean");
    return false;
}

void api_type_error(api_errors *e, const char *field, const json_t *v, const char *want)
{
    json_t *got = json_string(api_json_type_name(v));
    api_errors_add(e, API_FIELD_TYPE, field, got, "%s in body must be of type %s: \"%s\"", field,
                   want, api_json_type_name(v));
    json_decref(got);
}

static const json_t *get(const json_t *o, const char *k)
{
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

void api_check_enum(api_errors *e, const char *field, const json_t *v, const char *const *vals)
{
    if (!api_want_type(e, field, v, JSON_STRING))
        return;
    for (size_t i = 0; vals[i]; i++)
        if (strcmp(json_string_value(v), vals[i]) == 0)
            return;
    char buf[256] = "supported values: ";
    for (size_t i = 0; vals[i]; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof(buf) - n, "%s\"%s\"", i ? ", " : "", vals[i]);
    }
    api_errors_add(e, API_FIELD_UNSUPPORTED, field, v, "%s", buf);
}

void api_check_required_string(api_errors *e, const char *field, const json_t *v)
{
    if (!v || (json_is_string(v) && json_string_length(v) == 0))
        api_errors_add(e, API_FIELD_REQUIRED, field, NULL, NULL);
    else
        api_want_type(e, field, v, JSON_STRING);
}

static bool digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* RFC 3339 date-time: 2006-01-02T15:04:05[.frac](Z|+07:00). */
static bool is_date_time(const char *s)
{
    size_t n = strlen(s);
    if (n < 20 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' ||
        !digits(s + 8, 2) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2) || s[13] != ':' ||
        !digits(s + 14, 2) || s[16] != ':' || !digits(s + 17, 2))
        return false;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p == 'Z' || *p == 'z')
        return p[1] == '\0';
    if (*p != '+' && *p != '-')
        return false;
    return strlen(p) == 6 && digits(p + 1, 2) && p[3] == ':' && digits(p + 4, 2);
}

void api_check_date_time(api_errors *e, const char *field, const json_t *v)
{
    if (api_want_type(e, field, v, JSON_STRING) && !is_date_time(json_string_value(v)))
        api_errors_add(e, API_FIELD_INVALID, field, v,
                       "%s in body must be of type date-time: \"%s\"", field, json_string_value(v));
}

void api_check_string_map(api_errors *e, const char *field, const json_t *m, bool label_values)
{
    if (!api_want_type(e, field, m, JSON_OBJECT))
        return;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)m, k, v) {
        fpath f = fp(field, "[%s]", k);
        if (!api_want_type(e, f.s, v, JSON_STRING))
            continue;
        json_t *key = json_string(k);
        if (!api_is_qualified_name(k))
            api_errors_add(e, API_FIELD_INVALID, field, key,
                           "name part must consist of alphanumeric characters, '-', '_' or '.', "
                           "and must start and end with an alphanumeric character (e.g. "
                           "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                           "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
                           "subdomain prefix and '/' (e.g. 'example.com/MyName')");
        json_decref(key);
        if (label_values && !api_is_label_value(json_string_value(v)))
            api_errors_add(
                e, API_FIELD_INVALID, field, v,
                "a valid label must be an empty string or consist of alphanumeric "
                "characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
                "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')");
    }
}

void api_check_string_array(api_errors *e, const char *field, const json_t *a)
{
    if (!api_want_type(e, field, a, JSON_ARRAY))
        return;
    size_t i;
    json_t *v;
    json_array_foreach (a, i, v) {
        fpath f = fp(field, "[%zu]", i);
        api_want_type(e, f.s, v, JSON_STRING);
    }
}

static void check_env(api_errors *e, const char *field, const json_t *env, bool container_name)
{
    if (!api_want_type(e, field, env, JSON_ARRAY))
        return;
    size_t i;
    json_t *v;
    json_array_foreach (env, i, v) {
        fpath f = fp(field, "[%zu]", i);
        if (!api_want_type(e, f.s, v, JSON_OBJECT))
            continue;
        api_check_required_string(e, fp(f.s, ".name").s, get(v, "name"));
        if (get(v, "value"))
            api_want_type(e, fp(f.s, ".value").s, get(v, "value"), JSON_STRING);
        if (get(v, "valueFrom"))
            api_want_type(e, fp(f.s, ".valueFrom").s, get(v, "valueFrom"), JSON_OBJECT);
        if (container_name && get(v, "containerName"))
            api_want_type(e, fp(f.s, ".containerName").s, get(v, "containerName"), JSON_STRING);
    }
}

/* A container's volumeMounts: the paths the runtime can mount (a Pod's subPath rules; the mount
 * path absolute and clean, which asb serve's runtime needs). Names are checked against the
 * volumes by api_check_sandbox_mounts, where the Sandbox's volumes are known. */
static void check_volume_mounts(api_errors *e, const char *field, const json_t *mounts)
{
    size_t i;
    const json_t *m;
    json_array_foreach (mounts, i, m) {
        fpath f = fp(field, ".volumeMounts[%zu]", i);
        const json_t *path = get(m, "mountPath"), *sub = get(m, "subPath");
        if (json_is_string(path) && !path_is_clean_absolute(json_string_value(path)))
            api_errors_add(e, API_FIELD_INVALID, fp(f.s, ".mountPath").s, path,
                           "must be an absolute path without empty, '.' or '..' components, "
                           "and not /");
        const char *s = json_string_value(sub);
        if (s && *s && !path_is_clean_relative(s, true))
            api_errors_add(e, API_FIELD_INVALID, fp(f.s, ".subPath").s, sub,
                           "must be a relative path without empty, '.' or '..' components");
    }
}

static void check_containers(api_errors *e, const char *field, const json_t *cs, bool required)
{
    if (!cs) {
        if (required)
            api_errors_add(e, API_FIELD_REQUIRED, field, NULL, NULL);
        return;
    }
    if (!api_want_type(e, field, cs, JSON_ARRAY))
        return;
    if (required && json_array_size(cs) == 0)
        api_errors_add(e, API_FIELD_REQUIRED, field, NULL, NULL);
    size_t i;
    json_t *c;
    json_array_foreach (cs, i, c) {
        fpath f = fp(field, "[%zu]", i);
        if (!api_want_type(e, f.s, c, JSON_OBJECT))
            continue;
        fpath fn = fp(f.s, ".name");
        const json_t *name = get(c, "name");
        api_check_required_string(e, fn.s, name);
        const char *detail;
        if (json_is_string(name) && json_string_length(name) > 0) {
            if (!api_is_dns1123_label(json_string_value(name), &detail))
                api_errors_add(e, API_FIELD_INVALID, fn.s, name, "%s", detail);
            for (size_t j = 0; j < i; j++)
                if (json_equal(get(json_array_get(cs, j), "name"), (json_t *)name)) {
                    api_errors_add(e, API_FIELD_DUPLICATE, fn.s, name, NULL);
                    break;
                }
        }
        api_check_required_string(e, fp(f.s, ".image").s, get(c, "image"));
        if (get(c, "command"))
            api_check_string_array(e, fp(f.s, ".command").s, get(c, "command"));
        if (get(c, "args"))
            api_check_string_array(e, fp(f.s, ".args").s, get(c, "args"));
        const json_t *wd = get(c, "workingDir");
        if (wd && api_want_type(e, fp(f.s, ".workingDir").s, wd, JSON_STRING) &&
            json_string_length(wd) > 0 && json_string_value(wd)[0] != '/')
            api_errors_add(e, API_FIELD_INVALID, fp(f.s, ".workingDir").s, wd,
                           "must be an absolute path");
        const json_t *argv0 = json_array_get(get(c, "command"), 0);
        if (json_is_string(argv0) && json_string_length(argv0) == 0)
            api_errors_add(e, API_FIELD_INVALID, fp(f.s, ".command[0]").s, argv0,
                           "the program name may not be empty");
        if (get(c, "env"))
            check_env(e, fp(f.s, ".env").s, get(c, "env"), false);
        check_volume_mounts(e, f.s, get(c, "volumeMounts"));
        if (get(c, "ports"))
            api_want_type(e, fp(f.s, ".ports").s, get(c, "ports"), JSON_ARRAY);
    }
}

void api_check_pod_template(api_errors *e, const char *field, const json_t *pt)
{
    if (!pt) {
        api_errors_add(e, API_FIELD_REQUIRED, field, NULL, NULL);
        return;
    }
    if (!api_want_type(e, field, pt, JSON_OBJECT))
        return;
    const json_t *md = get(pt, "metadata");
    if (md && api_want_type(e, fp(field, ".metadata").s, md, JSON_OBJECT)) {
        if (get(md, "labels"))
            api_check_string_map(e, fp(field, ".metadata.labels").s, get(md, "labels"), true);
        if (get(md, "annotations"))
            api_check_string_map(e, fp(field, ".metadata.annotations").s, get(md, "annotations"),
                                 false);
    }
    fpath fs = fp(field, ".spec");
    const json_t *spec = get(pt, "spec");
    if (!spec) {
        api_errors_add(e, API_FIELD_REQUIRED, fs.s, NULL, NULL);
        return;
    }
    if (!api_want_type(e, fs.s, spec, JSON_OBJECT))
        return;
    check_containers(e, fp(fs.s, ".containers").s, get(spec, "containers"), true);
    if (get(spec, "initContainers"))
        check_containers(e, fp(fs.s, ".initContainers").s, get(spec, "initContainers"), false);
    /* Quantities, as the runtime will read them: not negative, and within what it counts (the
     * schema's pattern checked their form). */
    api_pod *pod = NULL;
    if (api_pod_parse(spec, fs.s, e, &pod) == -ENOMEM)
        e->oom = true;
    api_pod_free(pod);
    if (get(spec, "runtimeClassName"))
        api_want_type(e, fp(fs.s, ".runtimeClassName").s, get(spec, "runtimeClassName"),
                      JSON_STRING);
    if (get(spec, "automountServiceAccountToken"))
        api_want_type(e, fp(fs.s, ".automountServiceAccountToken").s,
                      get(spec, "automountServiceAccountToken"), JSON_TRUE);
    if (get(spec, "volumes"))
        api_want_type(e, fp(fs.s, ".volumes").s, get(spec, "volumes"), JSON_ARRAY);
}

void api_check_volume_claim_templates(api_errors *e, const char *field, const json_t *v)
{
    if (!api_want_type(e, field, v, JSON_ARRAY))
        return;
    size_t i;
    json_t *t;
    json_array_foreach (v, i, t) {
        fpath f = fp(field, "[%zu]", i);
        if (!api_want_type(e, f.s, t, JSON_OBJECT))
            continue;
        fpath fn = fp(f.s, ".metadata.name");
        const json_t *md = get(t, "metadata");
        if (md && !api_want_type(e, fp(f.s, ".metadata").s, md, JSON_OBJECT))
            continue;
        const json_t *name = get(md, "name");
        api_check_required_string(e, fn.s, name);
        const char *detail;
        if (json_is_string(name) && json_string_length(name) > 0 &&
            !api_is_dns1123_subdomain(json_string_value(name), &detail))
            api_errors_add(e, API_FIELD_INVALID, fn.s, name, "%s", detail);
        if (get(t, "spec"))
            api_want_type(e, fp(f.s, ".spec").s, get(t, "spec"), JSON_OBJECT);
    }
}

/* networking.k8s.io/v1 NetworkPolicyPort: port a number in range or a name, endPort (the
 * protocol is the schema's enum). */
static void check_np_ports(api_errors *e, const char *field, const json_t *ports)
{
    if (!api_want_type(e, field, ports, JSON_ARRAY))
        return;
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        fpath f = fp(field, "[%zu]", i);
        if (!api_want_type(e, f.s, p, JSON_OBJECT))
            continue;
        const json_t *port = get(p, "port");
        fpath fport = fp(f.s, ".port");
        if (json_is_integer(port)) {
            if (json_integer_value(port) < 1 || json_integer_value(port) > 65535)
                api_errors_add(e, API_FIELD_INVALID, fport.s, port,
                               "must be between 1 and 65535, inclusive");
        } else if (port && !json_is_string(port))
            api_errors_add(e, API_FIELD_TYPE, fport.s, port,
                           "%s in body must be of type int-or-string: \"%s\"", fport.s,
                           api_json_type_name(port));
        const json_t *end = get(p, "endPort");
        if (end && api_want_type(e, fp(f.s, ".endPort").s, end, JSON_INTEGER) &&
            (!json_is_integer(port) || json_integer_value(end) < json_integer_value(port)))
            api_errors_add(e, API_FIELD_INVALID, fp(f.s, ".endPort").s, end,
                           "must be greater than or equal to port, and port must be a number");
    }
}

/* NetworkPolicyPeer: podSelector / namespaceSelector objects, or an ipBlock with a cidr. */
static void check_np_peers(api_errors *e, const char *field, const json_t *peers)
{
    if (!api_want_type(e, field, peers, JSON_ARRAY))
        return;
    size_t i;
    json_t *p;
    json_array_foreach (peers, i, p) {
        fpath f = fp(field, "[%zu]", i);
        if (!api_want_type(e, f.s, p, JSON_OBJECT))
            continue;
        if (get(p, "podSelector"))
            api_want_type(e, fp(f.s, ".podSelector").s, get(p, "podSelector"), JSON_OBJECT);
        if (get(p, "namespaceSelector"))
            api_want_type(e, fp(f.s, ".namespaceSelector").s, get(p, "namespaceSelector"),
                          JSON_OBJECT);
        const json_t *ib = get(p, "ipBlock");
        if (ib && api_want_type(e, fp(f.s, ".ipBlock").s, ib, JSON_OBJECT)) {
            api_check_required_string(e, fp(f.s, ".ipBlock.cidr").s, get(ib, "cidr"));
            if (get(ib, "except"))
                api_check_string_array(e, fp(f.s, ".ipBlock.except").s, get(ib, "except"));
            if (get(p, "podSelector") || get(p, "namespaceSelector"))
                api_errors_add(e, API_FIELD_FORBIDDEN, f.s, NULL,
                               "may not specify both ipBlock and another peer");
        }
    }
}

static void check_np_rules(api_errors *e, const char *field, const json_t *rules, const char *peers)
{
    if (!api_want_type(e, field, rules, JSON_ARRAY))
        return;
    size_t i;
    json_t *r;
    json_array_foreach (rules, i, r) {
        fpath f = fp(field, "[%zu]", i);
        if (!api_want_type(e, f.s, r, JSON_OBJECT))
            continue;
        if (get(r, "ports"))
            check_np_ports(e, fp(f.s, ".ports").s, get(r, "ports"));
        if (get(r, peers))
            check_np_peers(e, fp(f.s, ".%s", peers).s, get(r, peers));
    }
}

void api_check_np_ingress(api_errors *e, const char *path, const json_t *v)
{
    check_np_rules(e, path, v, "from");
}

void api_check_np_egress(api_errors *e, const char *path, const json_t *v)
{
    check_np_rules(e, path, v, "to");
}

void api_check_claim_env(api_errors *e, const char *path, const json_t *v)
{
    check_env(e, path, v, true);
}

static bool has_name(const json_t *list, const char *member, const char *name)
{
    size_t i;
    const json_t *x;
    json_array_foreach (list, i, x) {
        const json_t *n = member ? get(get(x, member), "name") : get(x, "name");
        if (json_is_string(n) && strcmp(json_string_value(n), name) == 0)
            return true;
    }
    return false;
}

void api_check_sandbox_mounts(api_errors *e, const json_t *spec)
{
    const json_t *pod = get(get(spec, "podTemplate"), "spec");
    const json_t *vcts = get(spec, "volumeClaimTemplates");
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
        size_t i, j;
        const json_t *c, *m;
        json_array_foreach (get(pod, lists[l]), i, c) {
            json_array_foreach (get(c, "volumeMounts"), j, m) {
                const json_t *name = get(m, "name");
                const char *n = json_string_value(name);
                if (n && !has_name(get(pod, "volumes"), NULL, n) && !has_name(vcts, "metadata", n))
                    api_errors_add(e, API_FIELD_NOT_FOUND,
                                   fp("spec.podTemplate.spec.", "%s[%zu].volumeMounts[%zu].name",
                                      lists[l], i, j)
                                       .s,
                                   name, NULL);
            }
        }
    }
}
