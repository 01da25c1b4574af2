/* Events (events.k8s.io/v1) as kubectl shows them, for `asb get events` and `asb describe`:
 * in time order, and the repeats of one event about one object (same type, reason, message,
 * reporting controller) folded into one entry with a count. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Replaces items by the folded events, oldest first (by last time seen). A folded entry is a copy
 * of the group's newest Event with kubectl's fields for repeats filled in: series.count and
 * series.lastObservedTime (only when count > 1) and deprecatedFirstTimestamp. 0 or -ENOMEM. */
int cli_events_fold(json_t *items);

/* kubectl's LAST SEEN of a (folded) event into buf: "2m", or "2m (x3 over 10m)" for repeats. */
void cli_event_last_seen(char *buf, size_t size, const json_t *ev);

/* The table row of `asb get events` (ev NULL: the header): LAST SEEN, TYPE, REASON, OBJECT,
 * MESSAGE as kubectl; wide adds SOURCE, FIRST SEEN, COUNT, NAME; all_ns puts NAMESPACE first.
 * Cells owned; returns their number. */
size_t cli_events_columns(bool wide, bool all_ns, const json_t *ev, char *row[]);
