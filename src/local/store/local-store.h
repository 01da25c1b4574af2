/* local/store: the object store (local-store) and the event recorder (local-events): every
 * object and Event as JSON in SQLite, one resourceVersion, watches. What the other folders read
 * and write through; it decides nothing about what the objects mean. Includes from other
 * folders of src/local: metrics; never from a folder above it (docs/architecture.md, "src/local
 * in rooms"). */
/* The object store of `asb serve`: every object as JSON in SQLite (WAL), one global
 * resourceVersion counter, and an in-memory window of recent events for watches that wakes
 * waiters the moment a write is durable. Thread-safe: one mutex serialises the SQLite connection
 * and the event window, so event order is commit order. Writes are group-committed: a COMMIT
 * does not sync under the mutex; the writer waits (mutex released) for one fdatasync of the WAL
 * that covers its commit and those of every writer that committed meanwhile, so concurrent
 * writers share syncs. A write returns, and its event reaches watchers, only once durable; a
 * read (get, list, current_rv) waits for the sync of the commits before it, so nobody sees a
 * change before it is durable. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/api.h"
#include "basic/time-util.h"

typedef struct local_store local_store;

typedef enum store_event_type { STORE_ADDED, STORE_MODIFIED, STORE_DELETED } store_event_type;

/* Immutable once published; shared between watchers by reference count. */
typedef struct store_event {
    unsigned refs;
    uint64_t rv;
    store_event_type type;
    const api_kind *kind;
    json_t *object;     /* the object after the change (for DELETED: as deleted, new rv) */
    json_t *old_object; /* before the change; NULL for ADDED */
    char *object_json;  /* compact serialisation of object */
} store_event;

store_event *store_event_ref(store_event *e);
store_event *store_event_unref(store_event *e);

/* Opens (creating) the database at path. window = number of events kept for watches.
 * *ret is owned by the caller (local_store_free). */
int local_store_open(const char *path, size_t window, local_store **ret, char **ret_error);
local_store *local_store_free(local_store *s);

uint64_t local_store_current_rv(local_store *s);
/* Whether the database holds an object nested deeper than API_MAX_DEPTH (stored by a server
 * before that limit): such objects need the full default stack to be read and written. */
bool local_store_holds_deep_objects(const local_store *s);

/* Errors: -ENOENT (not found), -EEXIST (already exists), -ENOMEM, -EIO (SQLite). */

/* *ret: owned object. */
int local_store_get(local_store *s, const api_kind *k, const char *ns, const char *name,
                    json_t **ret);
/* The same, given the object as the caller last had it from the store (an event's, a get's;
 * never modified; may be NULL): while the row still has its resourceVersion, *ret is current
 * itself (a reference) instead of a parse of the row. */
int local_store_get_current(local_store *s, const api_kind *k, const char *ns, const char *name,
                            const json_t *current, json_t **ret);
/* ns NULL lists every namespace. *ret_items: owned array sorted by namespace/name; *ret_rv the
 * resourceVersion the list is consistent with. */
int local_store_list(local_store *s, const api_kind *k, const char *ns, json_t **ret_items,
                     uint64_t *ret_rv);
/* Objects written are shared, not copied: a created obj, an update's *ret_new and result, and
 * update_many's results are the very objects of their watch events (store_event.object), which
 * other threads read. Once a write succeeded, its caller reads them and never modifies them. */

/* obj must carry metadata.namespace and metadata.name; the store sets metadata.resourceVersion in
 * place. */
int local_store_create(local_store *s, const api_kind *k, json_t *obj);

/* Read-modify-write under the store lock. fn gets the stored object (borrowed) and returns
 * 0 with *ret_new (owned, resourceVersion is set by the store), STORE_UPDATE_UNCHANGED (the stored
 * object is returned and nothing is written), STORE_UPDATE_DELETE (the object is deleted; *ret_new,
 * if set, is the final state reported in the DELETED event and returned), or a negative errno
 * that is passed through. */
#define STORE_UPDATE_UNCHANGED 1
#define STORE_UPDATE_DELETE 2
typedef int (*store_update_fn)(const json_t *old, json_t **ret_new, void *payload);
int local_store_update(local_store *s, const api_kind *k, const char *ns, const char *name,
                       store_update_fn fn, void *payload, json_t **ret);
/* local_store_update with the object as the caller last had it from the store (as for
 * local_store_get_current): fn gets it while it is still current, without a parse of the row. */
int local_store_update_current(local_store *s, const api_kind *k, const char *ns,
                               const char *name, const json_t *current, store_update_fn fn,
                               void *payload, json_t **ret);
/* Several read-modify-writes in ONE transaction: every fn runs under the store lock on its
 * object as stored; if any fn or write fails nothing is written. Each changed object gets its own
 * resourceVersion and event, published together, so a watcher never sees one without the others.
 * On success ops[i].result is owned (as for local_store_update). */
typedef struct store_op {
    const api_kind *kind;
    const char *ns, *name;
    store_update_fn fn;
    void *payload;
    /* Optional: the object as the caller last saw it (from an event, never modified). While the
     * stored row still has its resourceVersion, fn gets it instead of a parse of the row. */
    const json_t *current;
    json_t *result;
} store_op;
int local_store_update_many(local_store *s, store_op *ops, size_t n);
/* *ret: the deleted object with the deletion's resourceVersion (owned). */
int local_store_delete(local_store *s, const api_kind *k, const char *ns, const char *name,
                       json_t **ret);

/* A batch: every write this thread makes between begin and end (create, update, update_many,
 * delete) joins ONE transaction, so N writes cost one COMMIT and one fsync instead of N. Each
 * write still succeeds or fails on its own (a SAVEPOINT), and still gets its own
 * resourceVersion and event; the events are published together at the COMMIT, so no watcher
 * sees a change before it is durable. The calling thread holds the store lock from begin to end:
 * other threads' reads and writes wait, so keep a batch to a few dozen writes and never wait
 * (local_store_wait) inside one. Batches do not nest (-EBUSY).
 * local_store_batch_end commits and publishes; on failure (-EIO) nothing of the batch happened,
 * no event is published and the resourceVersion counter is as it was before begin (objects the
 * caller passed may still carry the resourceVersion they were given). */
int local_store_batch_begin(local_store *s);
int local_store_batch_end(local_store *s);
/* Whether the calling thread has a batch of s open. */
bool local_store_in_batch(const local_store *s);

/* Watch support. Fails with -ESTALE when events after `after` are no longer retained;
 * *ret_oldest then says the oldest resourceVersion a watch may start from. */
int local_store_watch_check(local_store *s, uint64_t after, uint64_t *ret_oldest);
/* Blocks until events with rv > after exist, the monotonic deadline passes (returns 0), or the
 * store shuts down (-ESHUTDOWN). Returns the number of events stored in *ret (owned array of
 * owned references; free with store_events_free). -ESTALE if the watcher fell behind. */
int local_store_wait(local_store *s, uint64_t after, usec_t deadline, store_event ***ret);
/* local_store_wait that also returns 0 once local_store_nudge was called after the nudge count
 * in *nudges_seen (updated): a nudge wakes every waiter that asks for nudges, and one that
 * happened while the waiter was busy is not lost. */
int local_store_wait_nudged(local_store *s, uint64_t after, usec_t deadline, uint64_t *nudges_seen,
                            store_event ***ret);
void store_events_free(store_event **v, size_t n);
/* Wakes every waiter; later waits return -ESHUTDOWN immediately. */
void local_store_shutdown(local_store *s);
/* True once local_store_shutdown was called: long loops stop early. */
bool local_store_is_shutdown(local_store *s);
/* Makes current and next local_store_wait_nudged calls return 0 at once (before their
 * deadline): lets another thread wake the reconciler without a store change. */
void local_store_nudge(local_store *s);
