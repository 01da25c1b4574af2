#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/hex-util.h"
#include "unit.h"

TEST(unhexchar_digits_and_others)
{
    CHECK_INT_EQ(unhexchar('0'), 0);
    CHECK_INT_EQ(unhexchar('9'), 9);
    CHECK_INT_EQ(unhexchar('a'), 10);
    CHECK_INT_EQ(unhexchar('F'), 15);
    CHECK_INT_EQ(unhexchar('g'), -EINVAL);
    CHECK_INT_EQ(unhexchar('%'), -EINVAL);
    CHECK_INT_EQ(unhexchar('\0'), -EINVAL);
}

TEST(percent_decode_lenient_keeps_bad_escapes)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"a%20b", "a b"},   {"%2f%2F", "//"}, {"100%", "100%"}, {"%4", "%4"},
        {"%zz%41", "%zzA"}, {"a+b", "a+b"},   {"", ""},         {"%e2%9c%93", "\xe2\x9c\x93"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = 99;
        char *d = percent_decode_lenient(cases[i].in, strlen(cases[i].in), &n);
        CHECK_STR_EQ(d, cases[i].out);
        CHECK_INT_EQ(n, strlen(cases[i].out));
        free(d);
    }
}

TEST(percent_decode_lenient_reports_nul_by_length)
{
    size_t n = 0;
    char *d = percent_decode_lenient("a%00b", 5, &n);
    CHECK_INT_EQ(n, 3);
    CHECK(d && memcmp(d, "a\0b", 4) == 0);
    free(d);
    /* Only the first n bytes are read. */
    d = percent_decode_lenient("%41%42", 3, NULL);
    CHECK_STR_EQ(d, "A");
    free(d);
}
