/* Events as kubectl shows them (asb-events.h): repeats folded with a count, in time order. */
#include <stdlib.h>
#include <string.h>

#include "cli/asb-events.h"
#include "unit.h"

static json_t *ev(const char *name, const char *reason, const char *obj, const char *time)
{
    return json_pack("{s:{s:s},s:s,s:s,s:s,s:s,s:{s:s,s:s,s:s},s:s}", "metadata", "name", name,
                     "type", "Normal", "reason", reason, "note", "n", "reportingController", "c",
                     "regarding", "kind", "SandboxWarmPool", "name", obj, "namespace", "default",
                     "eventTime", time);
}

TEST(fold_and_order)
{
    json_t *items = json_array();
    json_array_append_new(items, ev("e1", "A", "p1", "2026-01-01T00:00:03.000000Z"));
    json_array_append_new(items, ev("e2", "B", "p1", "2026-01-01T00:00:01.000000Z"));
    json_array_append_new(items, ev("e3", "A", "p1", "2026-01-01T00:00:05.000000Z"));
    json_array_append_new(items, ev("e4", "A", "p2", "2026-01-01T00:00:04.000000Z"));
    json_array_append_new(items, ev("e5", "A", "p1", "2026-01-01T00:00:02.000000Z"));
    CHECK_INT_EQ(cli_events_fold(items), 0);
    CHECK_INT_EQ(json_array_size(items), 3);
    /* by last time seen: B (1 s), A about p2 (4 s), A about p1 (x3, 2 s .. 5 s) */
    const char *names[] = {"e2", "e4", "e3"};
    for (size_t i = 0; i < 3; i++)
        CHECK_STR_EQ(json_string_value(json_object_get(
                         json_object_get(json_array_get(items, i), "metadata"), "name")),
                     names[i]);
    json_t *a = json_array_get(items, 2);
    CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(a, "series"), "count")), 3);
    CHECK_STR_EQ(json_string_value(json_object_get(a, "deprecatedFirstTimestamp")),
                 "2026-01-01T00:00:02.000000Z");
    CHECK(json_object_get(json_array_get(items, 0), "series") == NULL);
    char buf[96];
    cli_event_last_seen(buf, sizeof(buf), a);
    CHECK(strstr(buf, " (x3 over ") != NULL);
    char *row[16];
    size_t n = cli_events_columns(true, false, a, row);
    CHECK_INT_EQ(n, 9);
    CHECK_STR_EQ(row[3], "sandboxwarmpool/p1");
    CHECK_STR_EQ(row[7], "3");
    for (size_t i = 0; i < n; i++)
        free(row[i]);
    json_decref(items);
}
