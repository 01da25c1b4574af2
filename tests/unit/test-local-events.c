/* The event recorder: the Event's shape, the per-object bound and the TTL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/time-util.h"
#include "local/store/local-events.h"
#include "store-db-fixtures.h"
#include "unit.h"

static json_t *regarding(const char *name)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:s}}", "apiVersion", "agents.x-k8s.io/v1beta1", "kind",
                     "Sandbox", "metadata", "name", name, "namespace", "default", "uid", name);
}

static size_t count(local_store *s)
{
    json_t *items = NULL;
    uint64_t rv;
    if (local_store_list(s, &api_event_kind, "default", &items, &rv) < 0)
        return 0;
    size_t n = json_array_size(items);
    json_decref(items);
    return n;
}

/* Inside a store batch (a claim's create adopting a member, a pool's refill) records are made in
 * the batch and keep the per-object bound (the index the bound needs is built by the first
 * record, batch or not); only the periodic sweep waits for a record outside a batch. */
TEST(records_inside_a_batch)
{
    /* First in this file: the index is built by the first record of the process. */
    char *db = temp_db("test-local-events"), *err = NULL;
    local_store *s = NULL;
    CHECK_INT_EQ(local_store_open(db, 1000, &s, &err), 0);
    json_t *c = regarding("c");
    CHECK(!local_store_in_batch(s));
    CHECK_INT_EQ(local_store_batch_begin(s), 0);
    CHECK(local_store_in_batch(s));
    for (int i = 0; i < LOCAL_EVENTS_PER_OBJECT + 5; i++)
        local_event_record(s, "ctl", c, LOCAL_EVENT_NORMAL, "R", "A", "event %d", i);
    CHECK_INT_EQ(local_store_batch_end(s), 0);
    CHECK(!local_store_in_batch(s));
    CHECK_INT_EQ(count(s), LOCAL_EVENTS_PER_OBJECT);
    json_decref(c);
    local_store_free(s);
    remove_db(db);
}

TEST(event_shape)
{
    char *db = temp_db("test-local-events"), *err = NULL;
    local_store *s = NULL;
    CHECK_INT_EQ(local_store_open(db, 100, &s, &err), 0);
    json_t *sb = regarding("one");
    local_event_record(s, "ctl", sb, LOCAL_EVENT_WARNING, "StartFailed", "Start", "no %s", "image");
    json_t *items = NULL;
    uint64_t rv;
    CHECK_INT_EQ(local_store_list(s, &api_event_kind, "default", &items, &rv), 0);
    CHECK_INT_EQ(json_array_size(items), 1);
    json_t *ev = json_array_get(items, 0);
    CHECK_STR_EQ(json_string_value(json_object_get(ev, "apiVersion")), "events.k8s.io/v1");
    CHECK_STR_EQ(json_string_value(json_object_get(ev, "kind")), "Event");
    CHECK_STR_EQ(json_string_value(json_object_get(ev, "type")), "Warning");
    CHECK_STR_EQ(json_string_value(json_object_get(ev, "reason")), "StartFailed");
    CHECK_STR_EQ(json_string_value(json_object_get(ev, "note")), "no image");
    CHECK_STR_EQ(json_string_value(json_object_get(ev, "reportingController")), "ctl");
    const json_t *reg = json_object_get(ev, "regarding");
    CHECK_STR_EQ(json_string_value(json_object_get(reg, "kind")), "Sandbox");
    CHECK_STR_EQ(json_string_value(json_object_get(reg, "uid")), "one");
    CHECK(strncmp(api_meta_string(ev, "name"), "one.", 4) == 0);
    CHECK_INT_EQ(strlen(json_string_value(json_object_get(ev, "eventTime"))), 27);
    json_decref(items);
    /* An object without a namespace is not recorded (and nothing breaks). */
    json_t *bad = json_pack("{s:s,s:{s:s}}", "kind", "Sandbox", "metadata", "name", "x");
    local_event_record(s, "ctl", bad, LOCAL_EVENT_NORMAL, "R", "A", "n");
    CHECK_INT_EQ(count(s), 1);
    json_decref(bad);
    json_decref(sb);
    local_store_free(s);
    remove_db(db);
}

TEST(per_object_bound_and_ttl)
{
    char *db = temp_db("test-local-events"), *err = NULL;
    local_store *s = NULL;
    CHECK_INT_EQ(local_store_open(db, 1000, &s, &err), 0);
    json_t *a = regarding("a"), *b = regarding("b");
    for (int i = 0; i < LOCAL_EVENTS_PER_OBJECT + 5; i++)
        local_event_record(s, "ctl", a, LOCAL_EVENT_NORMAL, "R", "A", "event %d", i);
    local_event_record(s, "ctl", b, LOCAL_EVENT_NORMAL, "R", "A", "only");
    CHECK_INT_EQ(count(s), LOCAL_EVENTS_PER_OBJECT + 1);
    /* The newest are kept: "event 24" is there, "event 0" is not. */
    json_t *items = NULL;
    uint64_t rv;
    CHECK_INT_EQ(local_store_list(s, &api_event_kind, "default", &items, &rv), 0);
    bool newest = false, oldest = false;
    size_t i;
    json_t *ev;
    json_array_foreach (items, i, ev) {
        const char *note = json_string_value(json_object_get(ev, "note"));
        newest |= strcmp(note, "event 24") == 0;
        oldest |= strcmp(note, "event 0") == 0;
    }
    CHECK(newest && !oldest);
    json_decref(items);
    /* Nothing is older than the TTL yet; an hour and a bit later everything is. */
    int64_t now = (int64_t)now_usec(CLOCK_REALTIME);
    CHECK_INT_EQ(local_events_prune(s, "default", now), 0);
    CHECK_INT_EQ(local_events_prune(s, NULL, now + LOCAL_EVENTS_TTL_USEC + 1000000),
                 LOCAL_EVENTS_PER_OBJECT + 1);
    CHECK_INT_EQ(count(s), 0);
    json_decref(a);
    json_decref(b);
    local_store_free(s);
    remove_db(db);
}
