/* libasb: manifests. YAML (multi-document, `---`) or JSON in; JSON objects out; and JSON back to
 * YAML for display. YAML is read with the YAML 1.2 core schema (true/false, not yes/no). */
#ifndef ASB_MANIFEST_H
#define ASB_MANIFEST_H

#include "asb/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses `len` bytes of YAML or JSON holding one or more objects and sets *out to a JSON array
 * (text) of the objects, in document order. Empty documents are skipped; a `kind: List` (or any
 * `*List` with `items`) is expanded into its items. Every object must be a mapping.
 * *out is owned by the caller (asb_free). Returns ASB_OK, ASB_EMANIFEST (message with line and
 * column via asb_error_last()), ASB_ENOMEM or ASB_EINVAL. */
ASB_PUBLIC int asb_manifest_parse(char **out, const char *data, size_t len);

/* Formats one JSON value (text) as a YAML document, as `kubectl get -o yaml` does (block style,
 * 2-space indent, strings quoted where they would read as another type).
 * *out is owned by the caller (asb_free). Returns ASB_OK, ASB_EINVAL (not JSON) or ASB_ENOMEM. */
ASB_PUBLIC int asb_manifest_to_yaml(char **out, const char *json);

#ifdef __cplusplus
}
#endif
#endif
