#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/base64.h"
#include "unit.h"

static char *enc(const char *s)
{
    char *out = NULL;
    size_t len = 0;
    if (base64_encode(s, strlen(s), &out, &len) < 0 || strlen(out) != len)
        abort();
    return out;
}

TEST(rfc4648_vectors)
{
    /* RFC 4648 §10. */
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                        "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char *e = enc(plain[i]);
        CHECK_STR_EQ(e, coded[i]);
        free(e);
        char *d = NULL;
        size_t n = 0;
        CHECK_INT_EQ(base64_decode(coded[i], strlen(coded[i]), &d, &n), 0);
        CHECK_INT_EQ(n, strlen(plain[i]));
        CHECK_STR_EQ(d, plain[i]);
        free(d);
    }
}

TEST(binary_round_trip_and_lenient_input)
{
    const unsigned char bytes[] = {0, 255, 1, 128};
    char *e = NULL, *d = NULL;
    size_t n = 0;
    CHECK_INT_EQ(base64_encode(bytes, sizeof(bytes), &e, NULL), 0);
    CHECK_STR_EQ(e, "AP8BgA==");
    free(e);
    /* Whitespace is skipped and padding is optional. */
    CHECK_INT_EQ(base64_decode("AP8B\ngA", 7, &d, &n), 0);
    CHECK_INT_EQ(n, 4);
    CHECK(memcmp(d, bytes, 4) == 0);
    free(d);
}

TEST(garbage_is_refused)
{
    char *d = NULL;
    size_t n = 0;
    CHECK_INT_EQ(base64_decode("Zm9v!", 5, &d, &n), -EINVAL);
    CHECK_INT_EQ(base64_decode("Zg==Zg==", 8, &d, &n), -EINVAL); /* data after padding */
    CHECK_INT_EQ(base64_decode("Z", 1, &d, &n), -EINVAL);        /* a lone sextet */
    CHECK_INT_EQ(base64_decode("Zg===", 5, &d, &n), -EINVAL);
    CHECK(d == NULL);
}
