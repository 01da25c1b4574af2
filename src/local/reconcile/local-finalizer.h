/* Deletion that finishes (docs/local-sandboxes.md): the local backend owns a finalizer on every
 * Sandbox it materialises, so a deleted Sandbox stays visible with metadata.deletionTimestamp
 * until its container, cgroups, network namespace, rules, DNS state and sockets are gone. The
 * object with a deletionTimestamp in the store is the durable record of a pending teardown: a
 * restarted `asb serve` completes it. Pure JSON helpers, usable from any store update fn. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#define LOCAL_TEARDOWN_FINALIZER "local.agents.x-k8s.io/teardown"

/* Whether metadata.finalizers of obj holds name. */
bool local_has_finalizer(const json_t *obj, const char *name);

/* Kubernetes DELETE semantics inside a store update fn: returns STORE_UPDATE_DELETE when old has
 * no finalizers, STORE_UPDATE_UNCHANGED when it is already being deleted, or 0 with *ret_new
 * (owned) a copy of old marked with metadata.deletionTimestamp (deletionGracePeriodSeconds 0).
 * -ENOMEM. */
int local_delete_or_mark(const json_t *old, json_t **ret_new);

/* A copy of old with name added to (or removed from) metadata.finalizers; NULL on ENOMEM. Owned.
 * An empty list is removed. */
json_t *local_finalizer_add(const json_t *old, const char *name);
json_t *local_finalizer_remove(const json_t *old, const char *name);
