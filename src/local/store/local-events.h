/* The event recorder of `asb serve`: what the controllers did and why, as events.k8s.io/v1 Event
 * objects in the store (served read-only under /apis/events.k8s.io/v1, watched like any kind).
 * Retention is bounded as kube-apiserver bounds it: an Event lives LOCAL_EVENTS_TTL_USEC, and
 * at most LOCAL_EVENTS_PER_OBJECT are kept per regarding object (oldest dropped first, at once
 * when this process recorded them; by the sweep that runs every minute otherwise). */
#pragma once

#include <jansson.h>

#include "local/store/local-store.h"

#define LOCAL_EVENTS_TTL_USEC (3600LL * 1000000LL) /* kube-apiserver's --event-ttl default */
#define LOCAL_EVENTS_PER_OBJECT 20

#define LOCAL_EVENT_NORMAL "Normal"
#define LOCAL_EVENT_WARNING "Warning"

/* Records one Event about `regarding` (a stored object: apiVersion, kind, metadata; borrowed) in
 * its namespace: type LOCAL_EVENT_NORMAL or LOCAL_EVENT_WARNING, reason a CamelCase word
 * ("Created", "Adopted", "Expired", "StartFailed"), action what the controller did ("Create",
 * "Adopt", "Delete", "Start"), note the human sentence. controller is the reportingController.
 * Best effort: a failure is logged, never returned, so recording cannot change what the
 * controller does. */
void local_event_record(local_store *s, const char *controller, const json_t *regarding,
                        const char *type, const char *reason, const char *action,
                        const char *note_fmt, ...) __attribute__((format(printf, 7, 8)));

/* Deletes the Events of namespace ns (NULL: all) older than the TTL at now_usec, and the oldest
 * of any object with more than LOCAL_EVENTS_PER_OBJECT. Returns the number deleted or a
 * negative errno. */
int local_events_prune(local_store *s, const char *ns, int64_t now_usec);
