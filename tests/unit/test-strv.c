#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/strv.h"
#include "unit.h"

TEST(push_keeps_the_array_null_terminated)
{
    strv s = STRV_INIT;
    CHECK(s.v == NULL);
    CHECK_INT_EQ(strv_push(&s, strdup("a")), 0);
    CHECK_INT_EQ(strv_push(&s, strdup("b")), 0);
    CHECK_INT_EQ(s.n, 2);
    CHECK_STR_EQ(s.v[0], "a");
    CHECK_STR_EQ(s.v[1], "b");
    CHECK(s.v[2] == NULL);
    /* A failed strdup is -ENOMEM and leaves the array as it was. */
    CHECK_INT_EQ(strv_push(&s, NULL), -ENOMEM);
    CHECK_INT_EQ(s.n, 2);
    CHECK(s.v[2] == NULL);
    strv_done(&s);
    CHECK(s.v == NULL && s.n == 0);
}

TEST(add_unique_skips_equal_strings)
{
    strv s = STRV_INIT;
    CHECK_INT_EQ(strv_add_unique(&s, "x"), 0);
    CHECK_INT_EQ(strv_add_unique(&s, "y"), 0);
    CHECK_INT_EQ(strv_add_unique(&s, "x"), 0);
    CHECK_INT_EQ(s.n, 2);
    CHECK_STR_EQ(s.v[1], "y");
    strv_done(&s);
}

TEST(strv_free_takes_null_and_handed_out_arrays)
{
    CHECK(strv_free(NULL) == NULL);
    strv s = STRV_INIT;
    CHECK_INT_EQ(strv_push(&s, strdup("kept")), 0);
    _cleanup_strv_free_ char **v = s.v; /* handed out: freed by the cleanup */
    CHECK_STR_EQ(v[0], "kept");
}
