/* `asb explain RESOURCE[.FIELD...]`: a kind's fields, from the schema admission validates with:
 * the kind tables of src/api as their CRD (api_crd()), with each embedded Kubernetes type
 * (PodSpec, PersistentVolumeClaimSpec, NetworkPolicy rules) taken from the pinned schemas asb
 * serve embeds (api_k8s_type_schema()). The output is kubectl explain's plaintext shape for a
 * custom resource (GROUP/KIND/VERSION, FIELD, DESCRIPTION, FIELDS with types and -required-);
 * --recursive prints the field tree. The pinned Kubernetes schemas carry no descriptions, so
 * fields of those types show `<empty>`, as kubectl does for a field without one. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-k8s.h"
#include "api/api.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"

static void explain_usage(FILE *f)
{
    fprintf(f,
            "Usage: asb explain RESOURCE[.FIELD...] [--recursive] [--api-version GROUP/VERSION]\n\n"
            "Describes the fields of a kind, or of one field of it, from the schema the server\n"
            "validates objects with (the kind's CRD, with the Kubernetes types it embeds).\n\n"
            "Examples:\n"
            "  asb explain sandbox\n"
            "  asb explain sandbox.spec.podTemplate.spec.containers\n"
            "  asb explain sandboxclaim --recursive\n\n"
            "Options:\n"
            "      --recursive             print every field below, without descriptions\n"
            "      --api-version GV        the kind's group/version (must be the served one)\n"
            "  -o, --output plaintext      the only format\n"
            "  -h, --help                  show this help\n" CLI_GLOBAL_HELP);
}

/* The node a schema node stands for: a field holding a Kubernetes type (x-asb-k8s-type) or a
 * reference inside one ({"$ref": ...}) is that type's schema. */
static const json_t *resolve(const json_t *node)
{
    const char *t = json_string_value(json_object_get(node, "x-asb-k8s-type"));
    const json_t *s = t ? api_k8s_type_schema(t) : NULL;
    return api_k8s_resolve(s ? s : node);
}

/* kubectl's type words for a custom resource's schema: string, integer, boolean, Object,
 * []T, map[string]T, IntOrString. */
static int type_word(buf *out, const json_t *node)
{
    node = resolve(node);
    if (json_is_true(json_object_get(node, "x-kubernetes-int-or-string")))
        return buf_append_str(out, "IntOrString");
    const char *t = json_string_value(json_object_get(node, "type"));
    if (t && strcmp(t, "array") == 0) {
        int r = buf_append_str(out, "[]");
        return r < 0 ? r : type_word(out, json_object_get(node, "items"));
    }
    const json_t *ap = json_object_get(node, "additionalProperties");
    if (json_is_object(ap) && !json_object_get(node, "properties")) {
        int r = buf_append_str(out, "map[string]");
        return r < 0 ? r : type_word(out, ap);
    }
    if (!t || strcmp(t, "object") == 0)
        return buf_append_str(out, "Object");
    return buf_append_str(out, t);
}

/* The object whose properties a node's fields are: itself, or its items' for an array (at any
 * depth), or its map values'. NULL when it has none. */
static const json_t *fields_of(const json_t *node)
{
    for (int depth = 0; node && depth < 8; depth++) {
        node = resolve(node);
        const json_t *p = json_object_get(node, "properties");
        if (json_is_object(p) && json_object_size(p) > 0)
            return node;
        const json_t *next = json_object_get(node, "items");
        if (!next)
            next = json_object_get(node, "additionalProperties");
        node = json_is_object(next) ? next : NULL;
    }
    return NULL;
}

static bool is_required(const json_t *parent, const char *name)
{
    size_t i;
    const json_t *v;
    json_array_foreach (json_object_get(parent, "required"), i, v)
        if (json_string_value(v) && strcmp(json_string_value(v), name) == 0)
            return true;
    return false;
}

/* Description text indented by `indent` spaces, one line per line of the text. */
static int put_description(buf *out, const char *text, int indent)
{
    int r = 0;
    for (const char *p = text; *p && r >= 0;) {
        size_t n = strcspn(p, "\n");
        r = buf_appendf(out, "%*s%.*s\n", indent, "", (int)n, p);
        p += n + (p[n] == '\n');
    }
    return r;
}

/* Names sorted, as kubectl lists fields. */
static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int put_fields(buf *out, const json_t *obj, bool recursive, int indent, int depth)
{
    const json_t *props = json_object_get(obj, "properties");
    size_t n = json_object_size(props), i = 0;
    _cleanup_free_ const char **names = calloc(n + 1, sizeof(*names));
    if (!names)
        return -ENOMEM;
    const char *key;
    const json_t *v;
    json_object_foreach ((json_t *)props, key, v)
        names[i++] = key;
    qsort(names, n, sizeof(*names), name_cmp);
    int r = 0;
    for (i = 0; i < n && r >= 0; i++) {
        const json_t *f = json_object_get(props, names[i]);
        r = buf_appendf(out, "%*s%s\t<", indent, "", names[i]);
        if (r >= 0)
            r = type_word(out, f);
        if (r >= 0)
            r = buf_appendf(out, ">%s\n", is_required(obj, names[i]) ? " -required-" : "");
        if (r < 0)
            break;
        if (recursive) {
            const json_t *sub = fields_of(f);
            if (sub && depth < 32)
                r = put_fields(out, sub, true, indent + 2, depth + 1);
            continue;
        }
        const char *d = json_string_value(json_object_get(f, "description"));
        if (d && *d)
            r = put_description(out, d, indent + 2);
        if (r >= 0)
            r = buf_append_str(out, "\n");
    }
    return r;
}

/* Walks the dotted field path from the kind's root schema; prints kubectl's error and returns
 * -ENOENT for a field that does not exist. */
static int walk(const json_t *root, char *path, const json_t **ret_node, const char **ret_name)
{
    const json_t *node = root;
    const char *name = NULL;
    for (char *save = NULL, *part = path ? strtok_r(path, ".", &save) : NULL; part;
         part = strtok_r(NULL, ".", &save)) {
        const json_t *obj = fields_of(node);
        const json_t *next = obj ? json_object_get(json_object_get(obj, "properties"), part) : NULL;
        if (!next) {
            fprintf(stderr, "error: field \"%s\" does not exist\n", part);
            return -ENOENT;
        }
        node = next;
        name = part;
    }
    *ret_node = node;
    *ret_name = name;
    return 0;
}

static int explain_print(const api_kind *k, const json_t *root, char *path, bool recursive)
{
    const json_t *node;
    const char *name;
    if (walk(root, path, &node, &name) < 0)
        return 1;
    const char *version = strchr(k->api_version, '/');
    _cleanup_(buf_donep) buf out = BUF_INIT;
    int r = buf_appendf(&out, "GROUP:      %s\nKIND:       %s\nVERSION:    %s\n\n", k->group,
                        k->kind, version ? version + 1 : k->api_version);
    if (r >= 0 && name) {
        r = buf_appendf(&out, "FIELD: %s <", name);
        if (r >= 0)
            r = type_word(&out, node);
        if (r >= 0)
            r = buf_append_str(&out, ">\n\n");
    }
    const char *d = json_string_value(json_object_get(node, "description"));
    if (r >= 0 && !recursive)
        r = buf_append_str(&out, "DESCRIPTION:\n");
    if (r >= 0 && !recursive)
        r = d && *d ? put_description(&out, d, 4) : buf_append_str(&out, "    <empty>\n");
    const json_t *obj = fields_of(node);
    if (r >= 0 && obj) {
        r = buf_append_str(&out, recursive ? "FIELDS:\n" : "    \nFIELDS:\n");
        if (r >= 0)
            r = put_fields(&out, obj, recursive, 2, 0);
    }
    if (r < 0) {
        fprintf(stderr, "error: %s\n", strerror(-r));
        return 1;
    }
    fwrite(out.data, 1, out.len, stdout);
    return 0;
}

int asb_explain(int argc, char **argv)
{
    enum { OPT_RECURSIVE = 1000, OPT_API_VERSION };
    static const struct option opts[] = {{"recursive", optional_argument, NULL, OPT_RECURSIVE},
                                         {"api-version", required_argument, NULL, OPT_API_VERSION},
                                         {"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    bool recursive = false;
    const char *api_version = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "o:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case OPT_RECURSIVE:
            if (!optarg || strcmp(optarg, "true") == 0)
                recursive = true;
            else if (strcmp(optarg, "false") != 0) {
                fprintf(stderr, "error: invalid argument \"%s\" for \"--recursive\" flag\n",
                        optarg);
                return 1;
            }
            break;
        case OPT_API_VERSION:
            api_version = optarg;
            break;
        case 'o':
            if (strcmp(optarg, "plaintext") != 0) {
                fprintf(stderr, "error: unsupported output format \"%s\"; supported: plaintext\n",
                        optarg);
                return 1;
            }
            break;
        default:
            return cli_usage_option(c, argv, explain_usage);
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "error: You must specify the type of resource to explain. Use \"asb "
                        "api-resources\" for a complete list of supported resources.\n");
        return 1;
    }
    _cleanup_free_ char *arg = strdup(argv[optind]);
    if (!arg) {
        fprintf(stderr, "error: %s\n", strerror(ENOMEM));
        return 1;
    }
    char *dot = strchr(arg, '.');
    if (dot)
        *dot++ = '\0';
    const api_kind *k = api_kind_by_name(arg);
    if (!k) {
        fprintf(stderr, "error: the server doesn't have a resource type \"%s\"\n", arg);
        return 1;
    }
    if (api_version && strcmp(api_version, k->api_version) != 0) {
        fprintf(stderr, "error: couldn't find resource for \"%s\" in %s\n", k->plural, api_version);
        return 1;
    }
    json_t *crd = api_crd(k, true);
    const json_t *root = json_object_get(
        json_object_get(
            json_array_get(json_object_get(json_object_get(crd, "spec"), "versions"), 0), "schema"),
        "openAPIV3Schema");
    int ret = root ? explain_print(k, root, dot, recursive) : 1;
    if (!root)
        fprintf(stderr, "error: no schema for %s\n", k->kind);
    json_decref(crd);
    return ret;
}
