/* Shared between the files of the reconcile core; not part of its API. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "reconcile/reconcile.h"

/* Borrowed label / annotation value or NULL. */
const char *rc_label(const json_t *obj, const char *key);
const char *rc_annotation(const json_t *obj, const char *key);
/* parent[key] as an object, created when missing (borrowed), NULL on ENOMEM. */
json_t *rc_object(json_t *parent, const char *key);
int64_t rc_creation_time(const json_t *obj);
/* qsort-style: older first, ties by name. */
int rc_cmp_age(const json_t *a, const json_t *b);
/* NameHash of the canonical (sorted, compact) JSON of v. */
void rc_hash_json(const json_t *v, char out[9]);
/* The pod template metadata of a sandbox built from template for a claim (§2.8 4h) in *ret
 * (owned); -EINVAL with err set on a metadata override conflict, or -ENOMEM. claim may be NULL
 * (warm pool). */
int rc_claim_pod_metadata(const json_t *template, const json_t *claim, json_t **ret,
                          api_error *err);
/* §2.7 semantic comparison: pod spec (after §2.6), VCT names+specs, service. */
bool rc_semantically_equal(const json_t *sandbox, const json_t *template);
