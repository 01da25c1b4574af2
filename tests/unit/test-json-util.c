#include <stdlib.h>
#include <string.h>

#include "shared/json-util.h"
#include "unit.h"

TEST(json_dumps_line_ends_in_one_newline)
{
    json_t *o = json_pack("{s:s,s:i}", "text", "a\nb", "n", 1);
    CHECK(o != NULL);
    size_t len = 0;
    char *line = json_dumps_line(o, JSON_COMPACT | JSON_SORT_KEYS, &len);
    CHECK_STR_EQ(line, "{\"n\":1,\"text\":\"a\\nb\"}\n");
    CHECK_INT_EQ(len, strlen("{\"n\":1,\"text\":\"a\\nb\"}\n"));
    free(line);
    /* The flags are json_dumps's; the length is optional. */
    line = json_dumps_line(json_object_get(o, "text"), JSON_ENCODE_ANY | JSON_ENSURE_ASCII, NULL);
    CHECK_STR_EQ(line, "\"a\\nb\"\n");
    free(line);
    json_decref(o);
}
