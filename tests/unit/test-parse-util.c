#include <errno.h>
#include <math.h>

#include "basic/parse-util.h"
#include "basic/time-util.h"
#include "unit.h"

TEST(go_bool)
{
    bool b = false;
    const char *truthy[] = {"1", "t", "T", "TRUE", "true", "True"};
    const char *falsy[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (unsigned i = 0; i < 6; i++) {
        CHECK_INT_EQ(parse_go_bool(truthy[i], &b), 0);
        CHECK(b);
        CHECK_INT_EQ(parse_go_bool(falsy[i], &b), 0);
        CHECK(!b);
    }
    CHECK_INT_EQ(parse_go_bool("banana", &b), -EINVAL);
    CHECK_INT_EQ(parse_go_bool("yes", &b), -EINVAL);
    CHECK_INT_EQ(parse_go_bool("", &b), -EINVAL);
    CHECK_INT_EQ(parse_go_bool("tRUE", &b), -EINVAL);
}

TEST(go_int)
{
    int64_t v = 0;
    CHECK_INT_EQ(parse_go_int("9090", &v), 0);
    CHECK_INT_EQ(v, 9090);
    CHECK_INT_EQ(parse_go_int("-3", &v), 0);
    CHECK_INT_EQ(v, -3);
    CHECK_INT_EQ(parse_go_int("0x10", &v), 0);
    CHECK_INT_EQ(v, 16);
    CHECK_INT_EQ(parse_go_int("010", &v), 0);
    CHECK_INT_EQ(v, 8);
    CHECK_INT_EQ(parse_go_int("0b1_01", &v), 0);
    CHECK_INT_EQ(v, 5);
    CHECK_INT_EQ(parse_go_int("1_000", &v), -EINVAL);
    CHECK_INT_EQ(parse_go_int("12a", &v), -EINVAL);
    CHECK_INT_EQ(parse_go_int("", &v), -EINVAL);
    CHECK_INT_EQ(parse_go_int("99999999999999999999", &v), -ERANGE);
    CHECK_INT_EQ(parse_go_int("-9223372036854775808", &v), 0);
    CHECK(v == INT64_MIN);
}

TEST(go_duration)
{
    usec_t u = 0;
    CHECK_INT_EQ(parse_go_duration("10s", &u), 0);
    CHECK_INT_EQ(u, 10 * USEC_PER_SEC);
    CHECK_INT_EQ(parse_go_duration("1m30s", &u), 0);
    CHECK_INT_EQ(u, 90 * USEC_PER_SEC);
    CHECK_INT_EQ(parse_go_duration("500ms", &u), 0);
    CHECK_INT_EQ(u, 500 * USEC_PER_MSEC);
    CHECK_INT_EQ(parse_go_duration("1.5h", &u), 0);
    CHECK_INT_EQ(u, 5400 * USEC_PER_SEC);
    CHECK_INT_EQ(parse_go_duration("0", &u), 0);
    CHECK_INT_EQ(u, 0);
    CHECK_INT_EQ(parse_go_duration("10", &u), -EINVAL);
    CHECK_INT_EQ(parse_go_duration("-1s", &u), -EINVAL);
    CHECK_INT_EQ(parse_go_duration("1x", &u), -EINVAL);
    CHECK_INT_EQ(parse_go_duration("", &u), -EINVAL);
    CHECK_INT_EQ(parse_go_duration(".s", &u), -EINVAL);
}

/* resource.Quantity's grammar: suffixes, exponents and signs read; anything else refused. */
TEST(quantities)
{
    static const struct {
        const char *s;
        long double want;
    } good[] = {
        {"1", 1},          {"0.5", 0.5},     {".5", 0.5},         {"3.", 3},
        {"+2", 2},         {"-1", -1},       {"1Ki", 1024},       {"1Gi", 1073741824.0L},
        {"2Ei", 2 * 1152921504606846976.0L}, {"500m", 0.5},       {"1k", 1000},
        {"1M", 1e6},       {"3P", 3e15},     {"250u", 2.5e-4L},   {"1e3", 1000},
        {"1E-2", 0.01L},   {"5e+2", 500},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        long double v = -42;
        CHECK_INT_EQ(parse_quantity(good[i].s, &v), 0);
        CHECK(fabsl(v - good[i].want) <= fabsl(good[i].want) * 1e-12L);
    }
    static const char *const bad[] = {"",    "lots", "1 Gi", "1GB", "inf", "nan", "0x10",
                                      "1Qi", "Gi",   ".",    "1e",  "1e1.5", " 1", "1..2",
                                      "--1", "1ki"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long double v;
        if (parse_quantity(bad[i], &v) != -EINVAL)
            printf("#   accepted \"%s\"\n", bad[i]);
        CHECK_INT_EQ(parse_quantity(bad[i], &v), -EINVAL);
    }
}
