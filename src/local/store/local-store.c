/* SQLite-backed object store with a watch event window. See local-store.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/metrics/local-metrics.h"
#include "local/store/local-store.h"
#include "shared/log.h"

/* The statements the store runs, prepared once per connection. */
typedef enum stmt_id {
    STMT_GET,
    STMT_LIST,
    STMT_LIST_NS,
    STMT_DELETE,
    STMT_INSERT,
    STMT_UPDATE,
    STMT_SET_RV,
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_SAVEPOINT,
    STMT_RELEASE,
    STMT_ROLLBACK_TO,
    STMT_ROLLBACK,
    STMT_COUNT
} stmt_id;

static const char *const stmt_sql[STMT_COUNT] = {
    [STMT_GET] = "SELECT data, rv FROM objects WHERE resource=?1 AND namespace=?2 AND name=?3",
    [STMT_LIST] = "SELECT data FROM objects WHERE resource=?1 ORDER BY namespace, name",
    [STMT_LIST_NS] = "SELECT data FROM objects WHERE resource=?1 AND namespace=?2 "
                     "ORDER BY namespace, name",
    [STMT_DELETE] = "DELETE FROM objects WHERE resource=?1 AND namespace=?2 AND name=?3",
    [STMT_INSERT] = "INSERT INTO objects(resource,namespace,name,rv,data) VALUES(?1,?2,?3,?4,?5)",
    [STMT_UPDATE] = "UPDATE objects SET rv=?4, data=?5 WHERE resource=?1 AND namespace=?2 AND "
                    "name=?3",
    [STMT_SET_RV] = "UPDATE meta SET value=?1 WHERE key='rv'",
    [STMT_BEGIN] = "BEGIN IMMEDIATE",
    [STMT_COMMIT] = "COMMIT",
    [STMT_SAVEPOINT] = "SAVEPOINT store_write",
    [STMT_RELEASE] = "RELEASE store_write",
    [STMT_ROLLBACK_TO] = "ROLLBACK TO store_write",
    [STMT_ROLLBACK] = "ROLLBACK",
};

struct local_store {
    pthread_mutex_t lock; /* the database, rv, the batch and commit_seq */
    sqlite3 *db;
    uint64_t rv;
    bool holds_deep_objects; /* a row nested deeper than API_MAX_DEPTH (written before the limit) */
    /* The watch window: ring, pending, compacted_rv, published_rv, shutting_down, nudges and
     * `changed` are under ring_lock, which is taken inside `lock` or alone (never the other way
     * round), so watchers and the publication of durable events never wait behind a write. */
    pthread_mutex_t ring_lock;
    pthread_cond_t changed;
    uint64_t compacted_rv; /* events with rv <= this are gone */
    store_event **ring;
    size_t window, head, count; /* ring[head] is the oldest */
    bool shutting_down;
    uint64_t nudges; /* local_store_nudge calls: wake waiters without a change */
    /* An open batch (local_store_batch_begin): its owner holds `lock` (recursive) until the
     * batch ends; every write inside is a SAVEPOINT of the one transaction, and its events wait
     * in `pending` until the COMMIT, so nobody sees a change that could still be rolled back. */
    bool in_batch;
    bool batch_failed;
    uint64_t batch_rv; /* s->rv when the batch began */
    /* Group commit. A COMMIT writes the WAL without syncing it (synchronous=NORMAL); the writer
     * then releases `lock` and waits until an fdatasync of the WAL covers its commit. One writer
     * at a time syncs (the leader) and covers every commit made before it started, so N
     * concurrent writers cost about two fsyncs instead of N serialised ones, and no writer
     * returns (nor is its event published) before its commit is durable. The sync has a lock of
     * its own, and neither the leader nor the waiters take `lock` again: in a burst of 50 claims
     * the leader waited 28 ms to get `lock` back behind the other creates, and every writer
     * waited for it. Durable events reach the window under ring_lock alone. wal_fd < 0: the
     * fallback, synchronous=FULL, every COMMIT syncs itself. */
    int wal_fd;
    pthread_mutex_t sync_lock;
    pthread_cond_t synced;
    uint64_t commit_seq, synced_seq; /* commits made (under lock) / known durable (sync_lock);
                                        read atomically across the two */
    bool syncing;       /* under sync_lock */
    /* Events of commits not yet durable (and of an open batch: seq 0), in commit order. */
    struct pending_event {
        store_event *e;
        uint64_t seq;
    } *pending;
    size_t n_pending, pending_cap;
    uint64_t published_rv; /* the newest event in the window */
    /* Statements prepared once (store_stmt) and reset after each use: parsing the SQL of every
     * read and write was 7 % of asb serve's CPU in a claim burst. */
    sqlite3_stmt *stmts[STMT_COUNT];
};

static void wait_durable_locked(local_store *s);

/* locking_mode=EXCLUSIVE before WAL: asb serve holds its state directory's flock, so no other
 * process opens this database; SQLite then keeps its lock for good and the WAL index in memory,
 * instead of six fcntl lock calls per write transaction (a claim burst made 312 for 50 claims)
 * and a lock per read. A database left by a server without it (or with it) opens either way. */
static const char schema[] =
    "PRAGMA locking_mode=EXCLUSIVE;"
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;" /* the WAL is synced by the group commit (struct local_store) */
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS objects(resource TEXT NOT NULL, namespace TEXT NOT NULL,"
    " name TEXT NOT NULL, rv INTEGER NOT NULL, data TEXT NOT NULL,"
    " PRIMARY KEY(resource, namespace, name));"
    "INSERT OR IGNORE INTO meta(key, value) VALUES('rv', 0);";

store_event *store_event_ref(store_event *e)
{
    __atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
    return e;
}

store_event *store_event_unref(store_event *e)
{
    if (!e || __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return NULL;
    json_decref(e->object);
    json_decref(e->old_object);
    free(e->object_json);
    free(e);
    return NULL;
}

void store_events_free(store_event **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        store_event_unref(v[i]);
    free(v);
}

/* Our own descriptor of the WAL for the group commit's fdatasync (the same inode SQLite writes:
 * it keeps the file, rewinding it after a checkpoint, until its connection closes). */
static int open_wal(local_store *s, const char *path)
{
    _cleanup_free_ char *wal = NULL;
    if (asprintf(&wal, "%s-wal", path) < 0)
        return -ENOMEM;
    s->wal_fd = open(wal, O_RDONLY | O_CLOEXEC);
    if (s->wal_fd < 0) {
        int e = errno;
        log_warn("cannot open the store's WAL: every commit syncs on its own", "path", wal, "error",
                 strerror(e));
        return -e;
    }
    /* The WAL's directory entry, once (SQLite syncs it at its first WAL sync, which is ours). */
    char *slash = strrchr(wal, '/');
    if (slash)
        *slash = '\0';
    const char *dir_path = !slash ? "." : *wal ? wal : "/";
    _cleanup_close_ int dir = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0)
        (void)fsync(dir);
    return 0;
}

/* Whether a row nests deeper than the API accepts today: a server before the limit stored it. */
static bool find_deep_rows(sqlite3 *db)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT data FROM objects", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool deep = false;
    while (!deep && sqlite3_step(st) == SQLITE_ROW) {
        const char *data = (const char *)sqlite3_column_text(st, 0);
        deep = data && api_json_text_deeper_than(data, (size_t)sqlite3_column_bytes(st, 0),
                                                 API_MAX_DEPTH);
    }
    sqlite3_finalize(st);
    return deep;
}

int local_store_open(const char *path, size_t window, local_store **ret, char **ret_error)
{
    local_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    /* Recursive: the owner of a batch holds the lock across the calls it makes inside. */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&s->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->changed, &ca);
    pthread_mutex_init(&s->sync_lock, NULL);
    pthread_mutex_init(&s->ring_lock, NULL);
    pthread_cond_init(&s->synced, NULL);
    pthread_condattr_destroy(&ca);
    s->wal_fd = -1;
    s->window = window ? window : 1;
    s->ring = calloc(s->window, sizeof(*s->ring));
    if (!s->ring) {
        local_store_free(s);
        return -ENOMEM;
    }
    int r = sqlite3_open_v2(path, &s->db,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    char *err = NULL;
    if (r == SQLITE_OK) {
        sqlite3_busy_timeout(s->db, 5000);
        r = sqlite3_exec(s->db, schema, NULL, NULL, &err);
    }
    if (r == SQLITE_OK) {
        sqlite3_stmt *st;
        r = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key='rv'", -1, &st, NULL);
        if (r == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW)
                s->rv = (uint64_t)sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        }
    }
    if (r == SQLITE_OK)
        s->holds_deep_objects = find_deep_rows(s->db);
    if (r == SQLITE_OK && open_wal(s, path) < 0)
        r = sqlite3_exec(s->db, "PRAGMA synchronous=FULL", NULL, NULL, &err);
    if (r != SQLITE_OK) {
        if (asprintf(ret_error, "%s: %s", path, err ? err : sqlite3_errmsg(s->db)) < 0)
            *ret_error = NULL;
        sqlite3_free(err);
        local_store_free(s);
        return -EIO;
    }
    s->compacted_rv = s->published_rv = s->rv;
    *ret = s;
    return 0;
}

local_store *local_store_free(local_store *s)
{
    if (!s)
        return NULL;
    for (size_t i = 0; i < s->count; i++)
        store_event_unref(s->ring[(s->head + i) % s->window]);
    free(s->ring);
    for (size_t i = 0; i < s->n_pending; i++)
        store_event_unref(s->pending[i].e);
    free(s->pending);
    for (size_t i = 0; i < STMT_COUNT; i++)
        sqlite3_finalize(s->stmts[i]);
    if (s->db)
        sqlite3_close(s->db);
    if (s->wal_fd >= 0)
        close(s->wal_fd);
    pthread_cond_destroy(&s->synced);
    pthread_mutex_destroy(&s->sync_lock);
    pthread_mutex_destroy(&s->ring_lock);
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return NULL;
}

bool local_store_holds_deep_objects(const local_store *s)
{
    return s->holds_deep_objects;
}

uint64_t local_store_current_rv(local_store *s)
{
    pthread_mutex_lock(&s->lock);
    wait_durable_locked(s);
    uint64_t rv = s->rv;
    pthread_mutex_unlock(&s->lock);
    return rv;
}

static int db_error(local_store *s, const char *what)
{
    log_error("sqlite", "op", what, "error", sqlite3_errmsg(s->db));
    return -EIO;
}

/* Statement id, prepared on first use; NULL (logged) when it cannot be. Caller holds the lock
 * and hands it back with stmt_done. */
static sqlite3_stmt *store_stmt(local_store *s, stmt_id id)
{
    if (!s->stmts[id] && sqlite3_prepare_v3(s->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                            &s->stmts[id], NULL) != SQLITE_OK) {
        db_error(s, stmt_sql[id]);
        s->stmts[id] = NULL;
    }
    return s->stmts[id];
}

/* Ends a statement's use: its read (or write) ends and its bindings go. */
static void stmt_done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Runs one of the statements that take no parameter and return no row. */
static int exec_stmt(local_store *s, stmt_id id)
{
    sqlite3_stmt *st = store_stmt(s, id);
    if (!st)
        return -EIO;
    int r = sqlite3_step(st) == SQLITE_DONE ? 0 : db_error(s, stmt_sql[id]);
    stmt_done(st);
    return r;
}

/* Parses a stored row; owned. */
static json_t *parse_row(sqlite3_stmt *st, int col)
{
    const char *data = (const char *)sqlite3_column_text(st, col);
    if (!data)
        return NULL;
    json_error_t jerr;
    json_t *o = json_loads(data, 0, &jerr);
    if (!o)
        log_error("corrupt object row", "error", jerr.text);
    return o;
}

/* current (optional): the object as the caller last saw it. When the row still has its
 * resourceVersion it is the stored object (events and the objects they carry are never
 * modified), and *ret is a new reference to it instead of a parse of the row. Caller holds the
 * lock. */
static int get_current_locked(local_store *s, const api_kind *k, const char *ns,
                              const char *name, const json_t *current, json_t **ret)
{
    sqlite3_stmt *st = store_stmt(s, STMT_GET);
    if (!st)
        return -EIO;
    sqlite3_bind_text(st, 1, k->plural, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    int ret_code = 0;
    if (r == SQLITE_ROW) {
        uint64_t rv = (uint64_t)sqlite3_column_int64(st, 1);
        if (current && rv && api_meta_rv(current) == rv)
            *ret = json_incref((json_t *)current);
        else
            *ret = parse_row(st, 0);
        ret_code = *ret ? 0 : -EIO;
    } else if (r == SQLITE_DONE)
        ret_code = -ENOENT;
    else
        ret_code = db_error(s, "get");
    stmt_done(st);
    return ret_code;
}

/* Caller holds the lock. */
static int get_locked(local_store *s, const api_kind *k, const char *ns, const char *name,
                      json_t **ret)
{
    return get_current_locked(s, k, ns, name, NULL, ret);
}

int local_store_get_current(local_store *s, const api_kind *k, const char *ns, const char *name,
                            const json_t *current, json_t **ret)
{
    pthread_mutex_lock(&s->lock);
    wait_durable_locked(s);
    int r = get_current_locked(s, k, ns, name, current, ret);
    pthread_mutex_unlock(&s->lock);
    return r;
}

int local_store_get(local_store *s, const api_kind *k, const char *ns, const char *name,
                    json_t **ret)
{
    return local_store_get_current(s, k, ns, name, NULL, ret);
}

int local_store_list(local_store *s, const api_kind *k, const char *ns, json_t **ret_items,
                     uint64_t *ret_rv)
{
    json_t *items = json_array();
    if (!items)
        return -ENOMEM;
    pthread_mutex_lock(&s->lock);
    wait_durable_locked(s);
    int r = 0;
    sqlite3_stmt *st = store_stmt(s, ns ? STMT_LIST_NS : STMT_LIST);
    if (!st) {
        r = -EIO;
        goto out;
    }
    sqlite3_bind_text(st, 1, k->plural, -1, SQLITE_STATIC);
    if (ns)
        sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *o = parse_row(st, 0);
        if (o)
            json_array_append_new(items, o);
    }
    if (step != SQLITE_DONE)
        r = db_error(s, "list");
    stmt_done(st);
    *ret_rv = s->rv;
out:
    pthread_mutex_unlock(&s->lock);
    if (r < 0) {
        json_decref(items);
        return r;
    }
    *ret_items = items;
    return 0;
}

/* Drops every retained event: watchers cannot be told about a change, so they must relist.
 * Caller holds the lock and ring_lock. */
static void forget_window_locked(local_store *s)
{
    while (s->n_pending)
        store_event_unref(s->pending[--s->n_pending].e);
    for (size_t i = 0; i < s->count; i++)
        s->ring[(s->head + i) % s->window] = store_event_unref(s->ring[(s->head + i) % s->window]);
    s->head = s->count = 0;
    s->compacted_rv = s->published_rv = s->rv;
    pthread_cond_broadcast(&s->changed);
}

/* Appends a made event to the window (steals it). Caller holds ring_lock. */
static void ring_push_locked(local_store *s, store_event *e)
{
    if (s->count == s->window) {
        store_event *gone = s->ring[s->head];
        s->compacted_rv = gone->rv;
        store_event_unref(gone);
        s->head = (s->head + 1) % s->window;
        s->count--;
    }
    s->ring[(s->head + s->count) % s->window] = e;
    s->count++;
    s->published_rv = e->rv;
}

/* Queues the event of a write; it reaches the window (and the watchers) once the write's commit
 * is durable (commit_done_locked, then settle_and_unlock). js: obj as written (write_row's
 * serialisation, reused), or NULL to serialise it here. Caller holds the lock; steals obj, old
 * and js. */
static void publish_locked(local_store *s, store_event_type type, const api_kind *k, json_t *obj,
                           json_t *old, char *js)
{
    store_event *e = calloc(1, sizeof(*e));
    if (!js && obj)
        js = json_dumps(obj, JSON_COMPACT);
    pthread_mutex_lock(&s->ring_lock);
    if (e && js && s->n_pending == s->pending_cap) {
        size_t cap = s->pending_cap ? 2 * s->pending_cap : 16;
        struct pending_event *v = realloc(s->pending, cap * sizeof(*v));
        if (v) {
            s->pending = v;
            s->pending_cap = cap;
        }
    }
    if (!e || !js || s->n_pending == s->pending_cap) {
        free(e);
        free(js);
        json_decref(obj);
        json_decref(old);
        if (s->in_batch)
            s->batch_failed = true; /* its changes could not all be announced: roll back */
        else
            forget_window_locked(s);
        pthread_mutex_unlock(&s->ring_lock);
        return;
    }
    *e = (store_event){1, s->rv, type, k, obj, old, js};
    s->pending[s->n_pending++] = (struct pending_event){e, 0};
    pthread_mutex_unlock(&s->ring_lock);
}

/* A COMMIT succeeded (outside a batch, or a batch's own): its events get its sequence number.
 * Returns that number for the sync (settle_and_unlock). Caller holds the lock. */
static uint64_t commit_done_locked(local_store *s)
{
    uint64_t seq = s->commit_seq + 1;
    __atomic_store_n(&s->commit_seq, seq, __ATOMIC_RELEASE); /* after the COMMIT wrote the WAL */
    pthread_mutex_lock(&s->ring_lock);
    for (size_t i = s->n_pending; i-- > 0 && s->pending[i].seq == 0;)
        s->pending[i].seq = seq;
    pthread_mutex_unlock(&s->ring_lock);
    return seq;
}

/* Moves the events of durable commits into the window. */
static void publish_durable(local_store *s)
{
    pthread_mutex_lock(&s->ring_lock);
    uint64_t synced = __atomic_load_n(&s->synced_seq, __ATOMIC_ACQUIRE);
    size_t i = 0;
    while (i < s->n_pending && s->pending[i].seq && s->pending[i].seq <= synced)
        ring_push_locked(s, s->pending[i++].e);
    if (i > 0) {
        memmove(s->pending, s->pending + i, (s->n_pending - i) * sizeof(*s->pending));
        s->n_pending -= i;
        pthread_cond_broadcast(&s->changed);
    }
    pthread_mutex_unlock(&s->ring_lock);
}

/* Returns once commit `seq` is durable and its events are in the window; takes neither `lock`
 * nor, while syncing, ring_lock. */
static void wait_synced(local_store *s, uint64_t seq)
{
    pthread_mutex_lock(&s->sync_lock);
    while (s->synced_seq < seq) {
        if (s->syncing) {
            pthread_cond_wait(&s->synced, &s->sync_lock);
            continue;
        }
        /* The leader: one fdatasync covers every commit made so far. */
        uint64_t upto = __atomic_load_n(&s->commit_seq, __ATOMIC_ACQUIRE);
        s->syncing = true;
        pthread_mutex_unlock(&s->sync_lock);
        usec_t t0 = now_usec(CLOCK_MONOTONIC);
        int r = fdatasync(s->wal_fd);
        int e = errno;
        local_metrics_store_sync((double)(now_usec(CLOCK_MONOTONIC) - t0) / 1e6);
        pthread_mutex_lock(&s->sync_lock);
        if (r < 0) /* the commit stands in the database; say so, as SQLite's own sync would */
            log_error("cannot sync the store's WAL", "error", strerror(e));
        s->syncing = false;
        __atomic_store_n(&s->synced_seq, MAX(s->synced_seq, upto), __ATOMIC_RELEASE);
        pthread_cond_broadcast(&s->synced);
    }
    pthread_mutex_unlock(&s->sync_lock);
    publish_durable(s);
}

/* Commit `seq` was made without a sync of the WAL (wal_fd >= 0) or with one (synchronous=FULL). */
static bool needs_sync(local_store *s, uint64_t seq)
{
    if (s->wal_fd >= 0)
        return true;
    pthread_mutex_lock(&s->sync_lock);
    __atomic_store_n(&s->synced_seq, MAX(s->synced_seq, seq), __ATOMIC_RELEASE);
    pthread_mutex_unlock(&s->sync_lock);
    return false;
}

/* Readers see durable state only: a read waits for the sync of the commits made before it (it
 * never adds a sync of its own while a writer leads one), so nobody acts on a change that a power
 * cut could still take back, and a reader never sees an object before its writer was told it
 * exists. The batch owner reads its own writes. Caller holds the lock once; it is released while
 * waiting. */
static void wait_durable_locked(local_store *s)
{
    while (!s->in_batch && __atomic_load_n(&s->synced_seq, __ATOMIC_ACQUIRE) < s->commit_seq) {
        uint64_t seq = s->commit_seq;
        if (!needs_sync(s, seq))
            break;
        pthread_mutex_unlock(&s->lock);
        wait_synced(s, seq);
        pthread_mutex_lock(&s->lock);
    }
}

/* The end of a public write, which releases the lock (held once): when it committed (the
 * resourceVersion moved since rv_before) and is not part of a batch, return once the commit is
 * durable and its events are in the window. */
static void settle_and_unlock(local_store *s, uint64_t rv_before)
{
    bool committed = !s->in_batch && s->rv != rv_before;
    uint64_t seq = committed ? commit_done_locked(s) : 0;
    pthread_mutex_unlock(&s->lock);
    if (!committed)
        return;
    if (needs_sync(s, seq))
        wait_synced(s, seq);
    else
        publish_durable(s);
}

static int set_rv(json_t *obj, uint64_t rv)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rv);
    json_t *md = json_object_get(obj, "metadata");
    return json_object_set_new(md, "resourceVersion", json_string(buf)) < 0 ? -ENOMEM : 0;
}

/* Writes (insert or replace) or deletes one row and bumps rv in one transaction. Caller holds the
 * lock. On success s->rv is the new resourceVersion. */
static int write_locked_txn(local_store *s, const api_kind *k, const char *ns, const char *name,
                            json_t *obj, bool insert_only, char **ret_data);

/* On failure obj is left as it was (its resourceVersion restored). */
static int write_locked(local_store *s, const api_kind *k, const char *ns, const char *name,
                        json_t *obj, bool insert_only, char **ret_data)
{
    json_t *md = obj ? json_object_get(obj, "metadata") : NULL;
    json_t *prev = json_incref(json_object_get(md, "resourceVersion"));
    int r = write_locked_txn(s, k, ns, name, obj, insert_only, ret_data);
    if (r < 0 && md) {
        if (prev)
            json_object_set(md, "resourceVersion", prev);
        else
            json_object_del(md, "resourceVersion");
    }
    json_decref(prev);
    return r;
}

/* One row statement inside an open transaction, at resourceVersion rv; *ret_data (optional,
 * owned): obj as written, for its event (publish_locked). */
static int write_row(local_store *s, const api_kind *k, const char *ns, const char *name,
                     json_t *obj, bool insert_only, uint64_t rv, char **ret_data)
{
    _cleanup_free_ char *data = NULL;
    if (obj) {
        if (set_rv(obj, rv) < 0)
            return -ENOMEM;
        data = json_dumps(obj, JSON_COMPACT);
        if (!data)
            return -ENOMEM;
    }
    sqlite3_stmt *st = store_stmt(s, !obj ? STMT_DELETE : insert_only ? STMT_INSERT : STMT_UPDATE);
    if (!st)
        return -EIO;
    sqlite3_bind_text(st, 1, k->plural, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
    if (obj) {
        sqlite3_bind_int64(st, 4, (sqlite3_int64)rv);
        sqlite3_bind_text(st, 5, data, -1, SQLITE_STATIC);
    }
    int step = sqlite3_step(st);
    int r = 0;
    if (step == SQLITE_CONSTRAINT)
        r = -EEXIST;
    else if (step != SQLITE_DONE)
        r = db_error(s, "write");
    else if (sqlite3_changes(s->db) != 1)
        r = -ENOENT;
    stmt_done(st);
    if (r == 0 && ret_data)
        *ret_data = TAKE_PTR(data);
    return r;
}

/* One write's transaction: its own BEGIN IMMEDIATE ... COMMIT (one fsync), or inside a batch a
 * SAVEPOINT of the batch's transaction, so a failed write undoes only itself. */
static int txn_begin(local_store *s)
{
    return exec_stmt(s, s->in_batch ? STMT_SAVEPOINT : STMT_BEGIN);
}

static int txn_commit(local_store *s)
{
    return exec_stmt(s, s->in_batch ? STMT_RELEASE : STMT_COMMIT);
}

static void txn_rollback(local_store *s)
{
    if (s->in_batch) {
        if (exec_stmt(s, STMT_ROLLBACK_TO) < 0 || exec_stmt(s, STMT_RELEASE) < 0)
            s->batch_failed = true;
    } else
        exec_stmt(s, STMT_ROLLBACK);
}

static int commit_rv(local_store *s, uint64_t rv)
{
    sqlite3_stmt *st = store_stmt(s, STMT_SET_RV);
    if (!st)
        return -EIO;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)rv);
    int r = sqlite3_step(st) == SQLITE_DONE ? 0 : db_error(s, "rv");
    stmt_done(st);
    if (r == 0)
        r = txn_commit(s);
    return r;
}

static int write_locked_txn(local_store *s, const api_kind *k, const char *ns, const char *name,
                            json_t *obj, bool insert_only, char **ret_data)
{
    uint64_t rv = s->rv + 1;
    int r = txn_begin(s);
    if (r < 0)
        return r;
    char *data = NULL;
    r = write_row(s, k, ns, name, obj, insert_only, rv, &data);
    if (r == 0)
        r = commit_rv(s, rv);
    if (r < 0) {
        free(data);
        txn_rollback(s);
        return r;
    }
    if (ret_data)
        *ret_data = data;
    else
        free(data);
    s->rv = rv;
    return 0;
}

int local_store_create(local_store *s, const api_kind *k, json_t *obj)
{
    const char *ns = api_meta_string(obj, "namespace"), *name = api_meta_string(obj, "name");
    if (!ns || !name)
        return -EINVAL;
    pthread_mutex_lock(&s->lock);
    uint64_t rv_before = s->rv;
    char *data = NULL;
    int r = write_locked(s, k, ns, name, obj, true, &data);
    if (r == 0) /* the event shares obj (local-store.h) */
        publish_locked(s, STORE_ADDED, k, json_incref(obj), NULL, data);
    settle_and_unlock(s, rv_before);
    return r;
}

int local_store_update(local_store *s, const api_kind *k, const char *ns, const char *name,
                       store_update_fn fn, void *payload, json_t **ret)
{
    return local_store_update_current(s, k, ns, name, NULL, fn, payload, ret);
}

int local_store_update_current(local_store *s, const api_kind *k, const char *ns,
                               const char *name, const json_t *current, store_update_fn fn,
                               void *payload, json_t **ret)
{
    pthread_mutex_lock(&s->lock);
    uint64_t rv_before = s->rv;
    json_t *old = NULL, *new = NULL;
    int r = get_current_locked(s, k, ns, name, current, &old);
    if (r < 0)
        goto out;
    r = fn(old, &new, payload);
    if (r < 0)
        goto out;
    if (r == STORE_UPDATE_UNCHANGED) {
        *ret = TAKE_PTR(old);
        r = 0;
        goto out;
    }
    if (r == STORE_UPDATE_DELETE) {
        json_t *gone = json_deep_copy(new ? new : old);
        if (!gone) {
            r = -ENOMEM;
            goto out;
        }
        r = write_locked(s, k, ns, name, NULL, false, NULL);
        if (r == 0)
            r = set_rv(gone, s->rv);
        if (r < 0) {
            json_decref(gone);
            goto out;
        }
        publish_locked(s, STORE_DELETED, k, json_deep_copy(gone), TAKE_PTR(old), NULL);
        *ret = gone;
        goto out;
    }
    char *data = NULL;
    r = write_locked(s, k, ns, name, new, false, &data);
    if (r < 0)
        goto out;
    publish_locked(s, STORE_MODIFIED, k, json_incref(new), TAKE_PTR(old), data); /* shares new */
    *ret = TAKE_PTR(new);
out:
    settle_and_unlock(s, rv_before);
    json_decref(old);
    json_decref(new);
    return r;
}

int local_store_delete(local_store *s, const api_kind *k, const char *ns, const char *name,
                       json_t **ret)
{
    pthread_mutex_lock(&s->lock);
    uint64_t rv_before = s->rv;
    json_t *old = NULL;
    int r = get_locked(s, k, ns, name, &old);
    if (r == 0)
        r = write_locked(s, k, ns, name, NULL, false, NULL);
    if (r == 0) {
        json_t *gone = json_deep_copy(old);
        r = gone ? set_rv(gone, s->rv) : -ENOMEM;
        if (r == 0) {
            *ret = json_incref(gone);
            publish_locked(s, STORE_DELETED, k, gone, TAKE_PTR(old), NULL);
        } else {
            json_decref(gone);
        }
    }
    settle_and_unlock(s, rv_before);
    json_decref(old);
    return r;
}

int local_store_update_many(local_store *s, store_op *ops, size_t n)
{
    pthread_mutex_lock(&s->lock);
    uint64_t rv_before = s->rv;
    json_t **olds = calloc(n ? n : 1, sizeof(*olds)), **news = calloc(n ? n : 1, sizeof(*news));
    char **data = calloc(n ? n : 1, sizeof(*data));
    int *res = calloc(n ? n : 1, sizeof(*res));
    int r = olds && news && data && res ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        ops[i].result = NULL;
        r = get_current_locked(s, ops[i].kind, ops[i].ns, ops[i].name, ops[i].current, &olds[i]);
        if (r == 0) {
            int k = ops[i].fn(olds[i], &news[i], ops[i].payload);
            if (k < 0)
                r = k;
            else
                res[i] = k;
        }
    }
    uint64_t rv = s->rv;
    bool began = false;
    if (r >= 0) {
        r = txn_begin(s);
        began = r == 0;
    }
    for (size_t i = 0; r >= 0 && i < n; i++) {
        if (res[i] == STORE_UPDATE_UNCHANGED)
            continue;
        if (res[i] == STORE_UPDATE_DELETE) {
            r = write_row(s, ops[i].kind, ops[i].ns, ops[i].name, NULL, false, ++rv, NULL);
            if (r == 0) {
                json_t *gone = json_deep_copy(news[i] ? news[i] : olds[i]);
                json_decref(news[i]);
                news[i] = gone;
                r = gone ? set_rv(gone, rv) : -ENOMEM;
            }
        } else
            r = write_row(s, ops[i].kind, ops[i].ns, ops[i].name, news[i], false, ++rv, &data[i]);
    }
    if (r >= 0 && rv != s->rv)
        r = commit_rv(s, rv);
    else if (r >= 0 && began)
        r = txn_commit(s);
    if (r < 0 && began)
        txn_rollback(s);
    if (r >= 0) {
        uint64_t base = s->rv;
        for (size_t i = 0; i < n; i++) {
            if (res[i] == STORE_UPDATE_UNCHANGED) {
                ops[i].result = TAKE_PTR(olds[i]);
                continue;
            }
            s->rv = ++base;
            ops[i].result = json_incref(news[i]);
            publish_locked(s, res[i] == STORE_UPDATE_DELETE ? STORE_DELETED : STORE_MODIFIED,
                           ops[i].kind, json_incref(news[i]), TAKE_PTR(olds[i]),
                           TAKE_PTR(data[i]));
        }
        r = 0;
    }
    settle_and_unlock(s, rv_before);
    for (size_t i = 0; olds && i < n; i++)
        json_decref(olds[i]);
    for (size_t i = 0; news && i < n; i++)
        json_decref(news[i]);
    for (size_t i = 0; data && i < n; i++)
        free(data[i]);
    free(data);
    free(olds);
    free(news);
    free(res);
    return r;
}

/* The store whose batch this thread has open, if any. */
static __thread const local_store *batch_of_thread;

bool local_store_in_batch(const local_store *s)
{
    return batch_of_thread == s;
}

int local_store_batch_begin(local_store *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->in_batch) { /* batches do not nest */
        pthread_mutex_unlock(&s->lock);
        return -EBUSY;
    }
    int r = exec_stmt(s, STMT_BEGIN);
    if (r < 0) {
        pthread_mutex_unlock(&s->lock);
        return r;
    }
    s->in_batch = true;
    s->batch_failed = false;
    s->batch_rv = s->rv;
    batch_of_thread = s;
    return 0; /* the lock stays held until local_store_batch_end */
}

int local_store_batch_end(local_store *s)
{
    if (!s->in_batch)
        return -EINVAL;
    int r = s->batch_failed ? -EIO : exec_stmt(s, STMT_COMMIT);
    s->in_batch = false;
    batch_of_thread = NULL;
    if (r == 0) {
        settle_and_unlock(s, s->batch_rv);
        return 0;
    }
    exec_stmt(s, STMT_ROLLBACK);
    /* Drop the batch's own events (seq 0): the earlier ones belong to other writers' commits
     * still waiting for their sync. */
    pthread_mutex_lock(&s->ring_lock);
    while (s->n_pending && s->pending[s->n_pending - 1].seq == 0)
        store_event_unref(s->pending[--s->n_pending].e);
    pthread_mutex_unlock(&s->ring_lock);
    s->rv = s->batch_rv; /* nothing of the batch happened */
    pthread_mutex_unlock(&s->lock);
    return r;
}

int local_store_watch_check(local_store *s, uint64_t after, uint64_t *ret_oldest)
{
    pthread_mutex_lock(&s->ring_lock);
    int r = after < s->compacted_rv ? -ESTALE : 0;
    *ret_oldest = s->compacted_rv;
    pthread_mutex_unlock(&s->ring_lock);
    return r;
}

/* Plural names are unique across both groups, so they key the objects table. */

/* Collects retained events with rv > after. Caller holds ring_lock. */
static int collect_locked(local_store *s, uint64_t after, store_event ***ret)
{
    /* The window is in ascending resourceVersion order: binary search the first rv > after. */
    size_t lo = 0, hi = s->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ring[(s->head + mid) % s->window]->rv > after)
            hi = mid;
        else
            lo = mid + 1;
    }
    size_t first = lo;
    size_t n = s->count - first;
    if (n == 0)
        return 0;
    store_event **v = malloc(n * sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        v[i] = store_event_ref(s->ring[(s->head + first + i) % s->window]);
    *ret = v;
    return (int)MIN(n, (size_t)0x7fffffff);
}

int local_store_wait(local_store *s, uint64_t after, usec_t deadline, store_event ***ret)
{
    return local_store_wait_nudged(s, after, deadline, NULL, ret);
}

int local_store_wait_nudged(local_store *s, uint64_t after, usec_t deadline, uint64_t *nudges_seen,
                            store_event ***ret)
{
    struct timespec ts = {(time_t)(deadline / USEC_PER_SEC),
                          (long)(deadline % USEC_PER_SEC) * 1000};
    int r;
    pthread_mutex_lock(&s->ring_lock);
    for (;;) {
        if (s->shutting_down) {
            r = -ESHUTDOWN;
            break;
        }
        if (after < s->compacted_rv) {
            r = -ESTALE;
            break;
        }
        if (s->published_rv > after) {
            r = collect_locked(s, after, ret);
            break;
        }
        if (nudges_seen && s->nudges != *nudges_seen) {
            *nudges_seen = s->nudges;
            r = 0;
            break;
        }
        if (now_usec(CLOCK_MONOTONIC) >= deadline) {
            r = 0;
            break;
        }
        pthread_cond_timedwait(&s->changed, &s->ring_lock, &ts);
    }
    pthread_mutex_unlock(&s->ring_lock);
    return r;
}

void local_store_shutdown(local_store *s)
{
    pthread_mutex_lock(&s->ring_lock);
    s->shutting_down = true;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->ring_lock);
}

bool local_store_is_shutdown(local_store *s)
{
    pthread_mutex_lock(&s->ring_lock);
    bool r = s->shutting_down;
    pthread_mutex_unlock(&s->ring_lock);
    return r;
}

void local_store_nudge(local_store *s)
{
    pthread_mutex_lock(&s->ring_lock);
    s->nudges++;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->ring_lock);
}
