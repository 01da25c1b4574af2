/* The SQLite store: resourceVersions, read-modify-write, deletes, the watch window and reopen. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local/store/local-store.h"
#include "store-db-fixtures.h"
#include "unit.h"

static const api_kind *sbx(void)
{
    return api_kind_by_name("Sandbox");
}

static json_t *object(const char *name)
{
    return json_pack("{s:{s:s,s:s},s:{}}", "metadata", "name", name, "namespace", "default",
                     "spec");
}

/* The store at path (an event window of `window`), opened or the test failed. */
static local_store *open_store(const char *path, size_t window)
{
    local_store *s = NULL;
    char *err = NULL;
    CHECK_INT_EQ(local_store_open(path, window, &s, &err), 0);
    free(err);
    return s;
}

/* Creates object(name) in s. */
static void create_named(local_store *s, const char *name)
{
    json_t *o = object(name);
    CHECK_INT_EQ(local_store_create(s, sbx(), o), 0);
    json_decref(o);
}

static int set_label(const json_t *old, json_t **ret_new, void *payload)
{
    json_t *n = json_deep_copy(old);
    json_object_set_new(json_object_get(n, "metadata"), "labels",
                        json_pack("{s:s}", "k", (const char *)payload));
    *ret_new = n;
    return 0;
}

static int unchanged(const json_t *old, json_t **ret_new, void *payload)
{
    return STORE_UPDATE_UNCHANGED;
}

static int failing(const json_t *old, json_t **ret_new, void *payload)
{
    return -EPROTO;
}

TEST(crud_and_resource_versions)
{
    char *path = temp_db("test-local-store");
    local_store *s = open_store(path, 100);
    CHECK_INT_EQ(local_store_current_rv(s), 0);
    json_t *a = object("a");
    CHECK_INT_EQ(local_store_create(s, sbx(), a), 0);
    CHECK_STR_EQ(api_meta_string(a, "resourceVersion"), "1");
    CHECK_INT_EQ(local_store_create(s, sbx(), a), -EEXIST);
    CHECK_INT_EQ(local_store_current_rv(s), 1);
    json_t *got = NULL;
    CHECK_INT_EQ(local_store_get(s, sbx(), "default", "a", &got), 0);
    CHECK(json_equal(got, a));
    json_decref(got);
    CHECK_INT_EQ(local_store_get(s, sbx(), "default", "zz", &got), -ENOENT);
    CHECK_INT_EQ(local_store_get(s, api_kind_by_name("SandboxClaim"), "default", "a", &got),
                 -ENOENT);

    json_t *upd = NULL;
    CHECK_INT_EQ(local_store_update(s, sbx(), "default", "a", set_label, "v", &upd), 0);
    CHECK_STR_EQ(api_meta_string(upd, "resourceVersion"), "2");
    json_decref(upd);
    CHECK_INT_EQ(local_store_update(s, sbx(), "default", "a", unchanged, NULL, &upd), 0);
    CHECK_STR_EQ(api_meta_string(upd, "resourceVersion"), "2");
    json_decref(upd);
    CHECK_INT_EQ(local_store_update(s, sbx(), "default", "a", failing, NULL, &upd), -EPROTO);
    CHECK_INT_EQ(local_store_update(s, sbx(), "default", "nope", set_label, "v", &upd), -ENOENT);
    CHECK_INT_EQ(local_store_current_rv(s), 2);

    json_t *b = object("b");
    CHECK_INT_EQ(local_store_create(s, sbx(), b), 0);
    json_t *items = NULL;
    uint64_t rv = 0;
    CHECK_INT_EQ(local_store_list(s, sbx(), "default", &items, &rv), 0);
    CHECK_INT_EQ(json_array_size(items), 2);
    CHECK_INT_EQ(rv, 3);
    json_decref(items);
    CHECK_INT_EQ(local_store_list(s, sbx(), "other", &items, &rv), 0);
    CHECK_INT_EQ(json_array_size(items), 0);
    json_decref(items);

    json_t *gone = NULL;
    CHECK_INT_EQ(local_store_delete(s, sbx(), "default", "b", &gone), 0);
    CHECK_STR_EQ(api_meta_string(gone, "resourceVersion"), "4");
    json_decref(gone);
    CHECK_INT_EQ(local_store_delete(s, sbx(), "default", "b", &gone), -ENOENT);
    local_store_free(s);

    /* reopen: objects and the counter survive */
    s = open_store(path, 100);
    CHECK_INT_EQ(local_store_current_rv(s), 4);
    CHECK_INT_EQ(local_store_get(s, sbx(), "default", "a", &got), 0);
    CHECK_STR_EQ(api_meta_string(got, "resourceVersion"), "2");
    json_decref(got);
    uint64_t oldest = 0;
    CHECK_INT_EQ(local_store_watch_check(s, 3, &oldest), -ESTALE);
    CHECK_INT_EQ(oldest, 4);
    CHECK_INT_EQ(local_store_watch_check(s, 4, &oldest), 0);
    local_store_free(s);
    json_decref(a);
    json_decref(b);
    remove_db(path);
}

TEST(watch_window)
{
    char *path = temp_db("test-local-store");
    local_store *s = open_store(path, 3);
    store_event **ev = NULL;
    usec_t soon = now_usec(CLOCK_MONOTONIC) + 50 * USEC_PER_MSEC;
    CHECK_INT_EQ(local_store_wait(s, 0, soon, &ev), 0); /* times out */
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "o%d", i);
        create_named(s, name);
    }
    usec_t later = now_usec(CLOCK_MONOTONIC) + USEC_PER_SEC;
    CHECK_INT_EQ(local_store_wait(s, 1, later, &ev), -ESTALE);
    int n = local_store_wait(s, 2, later, &ev);
    CHECK_INT_EQ(n, 3);
    if (n == 3) {
        CHECK_INT_EQ(ev[0]->rv, 3);
        CHECK_INT_EQ(ev[2]->rv, 5);
        CHECK_INT_EQ(ev[0]->type, STORE_ADDED);
        CHECK(strstr(ev[0]->object_json, "\"o2\"") != NULL);
        store_events_free(ev, 3);
    }
    n = local_store_wait(s, 4, later, &ev);
    CHECK_INT_EQ(n, 1);
    if (n == 1)
        store_events_free(ev, 1);
    json_t *upd = NULL;
    CHECK_INT_EQ(local_store_update(s, sbx(), "default", "o4", set_label, "x", &upd), 0);
    json_decref(upd);
    n = local_store_wait(s, 5, later, &ev);
    CHECK_INT_EQ(n, 1);
    if (n == 1) {
        CHECK_INT_EQ(ev[0]->type, STORE_MODIFIED);
        CHECK(ev[0]->old_object != NULL);
        store_events_free(ev, 1);
    }
    local_store_shutdown(s);
    CHECK_INT_EQ(local_store_wait(s, 6, later, &ev), -ESHUTDOWN);
    local_store_free(s);
    remove_db(path);
}

static int delete_it(const json_t *old, json_t **ret_new, void *payload)
{
    (void)old;
    (void)ret_new;
    (void)payload;
    return STORE_UPDATE_DELETE;
}

TEST(update_many_is_atomic)
{
    char *db = temp_db("test-local-store");
    local_store *s = open_store(db, 100);
    create_named(s, "a");
    create_named(s, "b");
    create_named(s, "c");
    uint64_t rv0 = local_store_current_rv(s);
    /* one failing op: nothing is written, no event */
    store_op bad[2] = {{sbx(), "default", "a", set_label, "x", NULL, NULL},
                       {sbx(), "default", "b", failing, NULL, NULL, NULL}};
    CHECK_INT_EQ(local_store_update_many(s, bad, 2), -EPROTO);
    CHECK_INT_EQ(local_store_current_rv(s), rv0);
    json_t *a = NULL;
    CHECK_INT_EQ(local_store_get(s, sbx(), "default", "a", &a), 0);
    CHECK(!json_object_get(json_object_get(a, "metadata"), "labels"));
    json_decref(a);
    /* a missing object fails the whole batch */
    store_op missing[2] = {{sbx(), "default", "a", set_label, "x", NULL, NULL},
                           {sbx(), "default", "zz", set_label, "x", NULL, NULL}};
    CHECK_INT_EQ(local_store_update_many(s, missing, 2), -ENOENT);
    CHECK_INT_EQ(local_store_current_rv(s), rv0);
    /* modify + unchanged + delete: two events, consecutive resourceVersions */
    store_op ok[3] = {{sbx(), "default", "a", set_label, "y", NULL, NULL},
                      {sbx(), "default", "b", unchanged, NULL, NULL, NULL},
                      {sbx(), "default", "c", delete_it, NULL, NULL, NULL}};
    CHECK_INT_EQ(local_store_update_many(s, ok, 3), 0);
    CHECK_INT_EQ(local_store_current_rv(s), rv0 + 2);
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(ok[0].result, "metadata"), "labels"), "k")),
                 "y");
    CHECK(ok[1].result != NULL);
    CHECK(ok[2].result != NULL);
    for (size_t i = 0; i < 3; i++)
        json_decref(ok[i].result);
    store_event **evs = NULL;
    int n = local_store_wait(s, rv0, 0, &evs);
    CHECK_INT_EQ(n, 2);
    if (n == 2) {
        CHECK_INT_EQ(evs[0]->type, STORE_MODIFIED);
        CHECK_INT_EQ(evs[0]->rv, rv0 + 1);
        CHECK_INT_EQ(evs[1]->type, STORE_DELETED);
        CHECK_INT_EQ(evs[1]->rv, rv0 + 2);
        char want[32];
        snprintf(want, sizeof(want), "%llu", (unsigned long long)(rv0 + 2));
        CHECK_STR_EQ(api_meta_string(evs[1]->object, "resourceVersion"), want);
    }
    store_events_free(evs, n > 0 ? (size_t)n : 0);
    json_t *c = NULL;
    CHECK_INT_EQ(local_store_get(s, sbx(), "default", "c", &c), -ENOENT);
    /* survives reopen: the rv counter was committed */
    local_store_free(s);
    s = open_store(db, 100);
    CHECK_INT_EQ(local_store_current_rv(s), rv0 + 2);
    local_store_free(s);
    remove_db(db);
}

static int same_as_payload(const json_t *old, json_t **ret_new, void *payload)
{
    *(const json_t **)payload = old;
    return STORE_UPDATE_UNCHANGED;
}

/* store_op.current stands in for the row only while the row still has its resourceVersion. */
TEST(update_many_uses_current_only_while_it_is_current)
{
    char *db = temp_db("test-local-store");
    local_store *s = open_store(db, 100);
    json_t *a = object("a");
    CHECK_INT_EQ(local_store_create(s, sbx(), a), 0);
    const json_t *seen = NULL;
    store_op same[1] = {{sbx(), "default", "a", same_as_payload, &seen, a, NULL}};
    CHECK_INT_EQ(local_store_update_many(s, same, 1), 0);
    CHECK(seen == a); /* not parsed again */
    json_decref(same[0].result);
    json_t *upd = NULL;
    CHECK_INT_EQ(local_store_update(s, sbx(), "default", "a", set_label, "new", &upd), 0);
    json_decref(upd);
    store_op stale[1] = {{sbx(), "default", "a", set_label, "newer", a, NULL}};
    CHECK_INT_EQ(local_store_update_many(s, stale, 1), 0);
    /* the update saw the row (label "new" replaced), not the stale object */
    CHECK_STR_EQ(api_meta_string(stale[0].result, "resourceVersion"), "3");
    json_decref(stale[0].result);
    seen = NULL;
    store_op after[1] = {{sbx(), "default", "a", same_as_payload, &seen, a, NULL}};
    CHECK_INT_EQ(local_store_update_many(s, after, 1), 0);
    CHECK(seen != NULL && seen != a);
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(seen, "metadata"), "labels"), "k")),
                 "newer");
    json_decref(after[0].result);
    /* The same rule for a single get and update with the caller's object. */
    json_t *got = NULL;
    CHECK_INT_EQ(local_store_get_current(s, sbx(), "default", "a", a, &got), 0);
    CHECK(got != a); /* a is stale: the row, parsed */
    CHECK_STR_EQ(api_meta_string(got, "resourceVersion"), "3");
    json_t *fresh = got;
    CHECK_INT_EQ(local_store_get_current(s, sbx(), "default", "a", fresh, &got), 0);
    CHECK(got == fresh); /* still current: itself */
    json_decref(got);
    seen = NULL;
    CHECK_INT_EQ(local_store_update_current(s, sbx(), "default", "a", fresh, same_as_payload,
                                            &seen, &upd),
                 0);
    CHECK(seen == fresh);
    json_decref(upd);
    CHECK_INT_EQ(local_store_update_current(s, sbx(), "default", "a", a, set_label, "last", &upd),
                 0);
    CHECK_STR_EQ(api_meta_string(upd, "resourceVersion"), "4");
    json_decref(upd);
    json_decref(fresh);
    json_decref(a);
    local_store_free(s);
    remove_db(db);
}

/* A batch: N writes in one transaction; each write succeeds or fails alone (a failed one undoes
 * only itself); the events appear together at the end, with consecutive resourceVersions. */
TEST(batch_commits_once_and_publishes_at_the_end)
{
    char *db = temp_db("test-local-store");
    local_store *s = open_store(db, 100);
    create_named(s, "a");
    uint64_t rv0 = local_store_current_rv(s);
    CHECK_INT_EQ(local_store_batch_begin(s), 0);
    CHECK_INT_EQ(local_store_batch_begin(s), -EBUSY); /* no nesting */
    json_t *b = object("b"), *dup = object("a");
    CHECK_INT_EQ(local_store_create(s, sbx(), b), 0);
    CHECK_INT_EQ(local_store_create(s, sbx(), dup), -EEXIST); /* fails alone */
    store_op bad[2] = {{sbx(), "default", "a", set_label, "x", NULL, NULL},
                       {sbx(), "default", "b", failing, NULL, NULL, NULL}};
    CHECK_INT_EQ(local_store_update_many(s, bad, 2), -EPROTO);
    json_t *upd = NULL;
    CHECK_INT_EQ(local_store_update(s, sbx(), "default", "a", set_label, "y", &upd), 0);
    json_decref(upd);
    /* Inside the batch nothing is announced yet (the owner may read: the lock is recursive). */
    store_event **evs = NULL;
    CHECK_INT_EQ(local_store_wait(s, rv0, 0, &evs), 0);
    CHECK_INT_EQ(local_store_batch_end(s), 0);
    CHECK_INT_EQ(local_store_batch_end(s), -EINVAL);
    CHECK_INT_EQ(local_store_current_rv(s), rv0 + 2);
    int n = local_store_wait(s, rv0, 0, &evs);
    CHECK_INT_EQ(n, 2);
    if (n == 2) {
        CHECK_INT_EQ(evs[0]->type, STORE_ADDED);
        CHECK_INT_EQ(evs[0]->rv, rv0 + 1);
        CHECK(strstr(evs[0]->object_json, "\"b\"") != NULL);
        CHECK_INT_EQ(evs[1]->type, STORE_MODIFIED);
        CHECK_INT_EQ(evs[1]->rv, rv0 + 2);
        CHECK(strstr(evs[1]->object_json, "\"y\"") != NULL);
    }
    store_events_free(evs, n > 0 ? (size_t)n : 0);
    json_decref(b);
    json_decref(dup);
    /* Durable: after a reopen both writes are there and the counter is where it was. */
    local_store_free(s);
    s = open_store(db, 100);
    CHECK_INT_EQ(local_store_current_rv(s), rv0 + 2);
    json_t *got = NULL;
    CHECK_INT_EQ(local_store_get(s, sbx(), "default", "b", &got), 0);
    json_decref(got);
    CHECK_INT_EQ(local_store_get(s, sbx(), "default", "a", &got), 0);
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(got, "metadata"), "labels"), "k")),
                 "y");
    json_decref(got);
    local_store_free(s);
    remove_db(db);
}

/* A process killed inside a batch leaves none of the batch's writes behind. */
TEST(batch_killed_midway_leaves_nothing)
{
    char *db = temp_db("test-local-store");
    local_store *s = open_store(db, 100);
    create_named(s, "a");
    uint64_t rv0 = local_store_current_rv(s);
    local_store_free(s);
    pid_t pid = fork();
    if (pid == 0) {
        local_store *cs = NULL;
        char *cerr = NULL;
        if (local_store_open(db, 100, &cs, &cerr) < 0 || local_store_batch_begin(cs) < 0)
            _exit(1);
        json_t *b = object("b");
        json_t *upd = NULL;
        if (local_store_create(cs, sbx(), b) < 0 ||
            local_store_update(cs, sbx(), "default", "a", set_label, "x", &upd) < 0)
            _exit(1);
        _exit(0); /* no batch_end: as if killed */
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    s = open_store(db, 100);
    CHECK_INT_EQ(local_store_current_rv(s), rv0);
    json_t *got = NULL;
    CHECK_INT_EQ(local_store_get(s, sbx(), "default", "b", &got), -ENOENT);
    CHECK_INT_EQ(local_store_get(s, sbx(), "default", "a", &got), 0);
    CHECK(!json_object_get(json_object_get(got, "metadata"), "labels"));
    json_decref(got);
    local_store_free(s);
    remove_db(db);
}

typedef struct writer_arg {
    local_store *s;
    int id, failures;
} writer_arg;

static void *writer(void *p)
{
    writer_arg *a = p;
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof(name), "w%d-%d", a->id, i);
        json_t *o = object(name);
        a->failures += local_store_create(a->s, sbx(), o) != 0;
        /* its event is in the window when the write returns, whoever led the sync */
        uint64_t rv = strtoull(api_meta_string(o, "resourceVersion") ?: "0", NULL, 10);
        store_event **evs = NULL;
        int n = local_store_wait(a->s, rv - 1, 0, &evs);
        a->failures += n < 1 || evs[0]->rv != rv;
        store_events_free(evs, n > 0 ? (size_t)n : 0);
        json_decref(o);
    }
    return NULL;
}

/* Concurrent writers share syncs (group commit): every write returns once durable, and the
 * window holds every event once, in resourceVersion order. */
TEST(concurrent_writers_group_commit)
{
    char *db = temp_db("test-local-store");
    local_store *s = open_store(db, 1000);
    pthread_t t[8];
    writer_arg a[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (writer_arg){s, i, 0};
        CHECK_INT_EQ(pthread_create(&t[i], NULL, writer, &a[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        CHECK_INT_EQ(a[i].failures, 0);
    }
    CHECK_INT_EQ(local_store_current_rv(s), 160);
    store_event **evs = NULL;
    int n = local_store_wait(s, 0, 0, &evs);
    CHECK_INT_EQ(n, 160);
    for (int i = 0; i < n; i++)
        CHECK_INT_EQ(evs[i]->rv, (uint64_t)i + 1);
    store_events_free(evs, n > 0 ? (size_t)n : 0);
    local_store_free(s);
    s = open_store(db, 1000);
    json_t *items = NULL;
    uint64_t rv = 0;
    CHECK_INT_EQ(local_store_list(s, sbx(), NULL, &items, &rv), 0);
    CHECK_INT_EQ(json_array_size(items), 160);
    CHECK_INT_EQ(rv, 160);
    json_decref(items);
    local_store_free(s);
    remove_db(db);
}
