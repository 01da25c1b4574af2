/* runtimeClassName -> OCI runtime handler, as a Kubernetes RuntimeClass maps a class to a CRI
 * handler. Built in: runc, crun, runsc (alias gvisor) and kata (kata-runtime); ASB_RUNTIME_CLASSES
 * ("name=binary,name=binary") adds or overrides entries. A Sandbox without runtimeClassName uses
 * the default runtime (ASB_RUNTIME). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct runtime_class {
    char *name;
    char *binary; /* a name looked up in PATH or an absolute path */
} runtime_class;

/* Built-ins plus spec (may be NULL or empty). -EINVAL with *ret_error (owned) on a malformed
 * entry. *ret owned (runtime_classes_free). */
int runtime_classes_parse(const char *spec, runtime_class **ret, size_t *ret_n, char **ret_error);
runtime_class *runtime_classes_free(runtime_class *v, size_t n);
/* The handler binary of class name (borrowed), or NULL when no such class is configured. */
const char *runtime_class_binary(const runtime_class *v, size_t n, const char *name);
/* True when binary is an executable absolute path or found in PATH. */
bool runtime_binary_available(const char *binary);
