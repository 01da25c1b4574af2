/* runtimeClassName -> OCI runtime handler (local-runtime-class.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/runtime/local-runtime-class.h"

static const runtime_class builtin[] = {
    {(char *)"runc", (char *)"runc"},
    {(char *)"crun", (char *)"crun"},
    {(char *)"runsc", (char *)"runsc"},
    {(char *)"gvisor", (char *)"runsc"},
    {(char *)"kata", (char *)"kata-runtime"},
};

runtime_class *runtime_classes_free(runtime_class *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].name);
        free(v[i].binary);
    }
    free(v);
    return NULL;
}

/* Sets name -> binary, replacing an existing entry. */
static int put(runtime_class **v, size_t *n, const char *name, size_t name_len, const char *binary,
               size_t binary_len)
{
    char *nm = strndup(name, name_len), *bin = strndup(binary, binary_len);
    if (!nm || !bin) {
        free(nm);
        free(bin);
        return -ENOMEM;
    }
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i].name, nm) == 0) {
            free((*v)[i].binary);
            (*v)[i].binary = bin;
            free(nm);
            return 0;
        }
    runtime_class *nv = realloc(*v, (*n + 1) * sizeof(*nv));
    if (!nv) {
        free(nm);
        free(bin);
        return -ENOMEM;
    }
    *v = nv;
    nv[(*n)++] = (runtime_class){nm, bin};
    return 0;
}

/* A DNS-1123 subdomain, as RuntimeClass names are. */
static bool valid_class_name(const char *s, size_t len)
{
    if (len == 0 || len > 253)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !((c == '-' || c == '.') && i > 0 && i + 1 < len))
            return false;
    }
    return true;
}

int runtime_classes_parse(const char *spec, runtime_class **ret, size_t *ret_n, char **ret_error)
{
    runtime_class *v = NULL;
    size_t n = 0;
    int k = 0;
    *ret_error = NULL;
    for (size_t i = 0; k == 0 && i < ELEMENTSOF(builtin); i++)
        k = put(&v, &n, builtin[i].name, strlen(builtin[i].name), builtin[i].binary,
                strlen(builtin[i].binary));
    for (const char *p = spec ? spec : ""; k == 0 && *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        if (len == 0) {
            p++;
            continue;
        }
        if (!eq || eq == p || eq + 1 == p + len || !valid_class_name(p, (size_t)(eq - p))) {
            if (asprintf(ret_error,
                         "ASB_RUNTIME_CLASSES: \"%.*s\" is not NAME=BINARY with NAME a "
                         "lowercase RuntimeClass name",
                         (int)len, p) < 0)
                *ret_error = NULL;
            k = -EINVAL;
            break;
        }
        k = put(&v, &n, p, (size_t)(eq - p), eq + 1, (size_t)(p + len - eq - 1));
        p += len;
    }
    if (k < 0) {
        runtime_classes_free(v, n);
        return k;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

const char *runtime_class_binary(const runtime_class *v, size_t n, const char *name)
{
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return v[i].binary;
    return NULL;
}

bool runtime_binary_available(const char *binary)
{
    if (!binary || !*binary)
        return false;
    if (strchr(binary, '/'))
        return access(binary, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, ":");
        char *full = NULL;
        if (len > 0 && asprintf(&full, "%.*s/%s", (int)len, p, binary) >= 0) {
            bool ok = access(full, X_OK) == 0;
            free(full);
            if (ok)
                return true;
        }
        p += len;
        if (*p == ':')
            p++;
    }
    return false;
}
