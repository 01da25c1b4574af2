/* Manifests for the verbs that take -f (apply, create, replace): files read and parsed before the
 * server is touched, and each object checked as kubectl checks it. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "asb/asb.h"

/* Reads and parses files[0..n) ("-" = stdin) into docs[i], a JSON array of objects each (owned,
 * json_decref). Prints kubectl's error (`the path "x" cannot be read`, `error parsing x`) and
 * returns 1; 0 on success. On failure docs[] holds what was parsed so far (NULL after it). */
int cli_manifests_load(json_t **docs, const char *const *files, size_t n);

/* The name a file has in messages: "STDIN" for "-". Borrowed. */
const char *cli_manifest_name(const char *file);

/* Checks one object of a manifest (kind and apiVersion set and served, a name, a namespace that
 * agrees with -n) and sets its metadata.namespace when it has none. On success *ret_kind is its
 * kind and *ret_ns its namespace (borrowed from obj); else prints kubectl's message (`no matches
 * for kind`, `resource name may not be empty`, the namespace mismatch) and returns 1. `verb_ctx`
 * words the empty-name message ("retrieving current configuration of").*/
int cli_manifest_object(json_t *obj, const char *file, const char *verb_ctx,
                        const asb_kind **ret_kind, const char **ret_ns);
