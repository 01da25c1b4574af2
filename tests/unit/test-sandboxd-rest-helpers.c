/* Pure helpers of the REST half: Go mux path cleaning, percent-decoding, query lookup, Go JSON
 * escaping, mode validation, Range parsing, HTTP dates and preconditions. */
#include <errno.h>
#include <time.h>

#include "sandboxd/sandboxd-rest-internal.h"
#include "unit.h"

static void check_clean(const char *in, const char *out)
{
    char *c = rest_mux_clean_path(in);
    CHECK_STR_EQ(c, out);
    free(c);
}

TEST(mux_clean)
{
    check_clean("", "/");
    check_clean("/", "/");
    check_clean("/v1/files/", "/v1/files/");
    check_clean("/v1/files/../etc", "/v1/etc");
    check_clean("/v1/files/.", "/v1/files"); /* then the trailing-slash redirect */
    check_clean("/v1/files/./", "/v1/files/");
    check_clean("/v1//files//a", "/v1/files/a");
    check_clean("/v1/files/a/b/../", "/v1/files/a/");
    check_clean("/v1/files/%2E%2E", "/v1/files/%2E%2E");
    check_clean("/../..", "/");
    check_clean("v1/health", "/v1/health");
}

static void check_unescape(const char *in, bool plus, const char *out)
{
    char *s = NULL;
    int r = rest_unescape(in, strlen(in), plus, &s, NULL);
    if (!out)
        CHECK_INT_EQ(r, -EINVAL);
    else {
        CHECK_INT_EQ(r, 0);
        CHECK_STR_EQ(s, out);
    }
    free(s);
}

TEST(unescape)
{
    check_unescape("dir%2Fsub%2Ffile.txt", false, "dir/sub/file.txt");
    check_unescape("a%20b+c", false, "a b+c");
    check_unescape("a%20b+c", true, "a b c");
    check_unescape("%e9%E9", false, "\xe9\xe9");
    check_unescape("%", false, NULL);
    check_unescape("%2", false, NULL);
    check_unescape("%zz", false, NULL);
    CHECK(rest_mux_valid_escapes("a%2Fb", 5));
    CHECK(!rest_mux_valid_escapes("a%2", 3));
    CHECK(!rest_mux_valid_escapes("%g0", 3));
}

static void check_query(const char *q, const char *key, const char *want)
{
    char *v = NULL;
    CHECK_INT_EQ(rest_query_get(q, key, &v), 0);
    if (want)
        CHECK_STR_EQ(v, want);
    else
        CHECK(v == NULL);
    free(v);
}

TEST(query)
{
    check_query("mode=0755", "mode", "0755");
    check_query("a=1&mode=%30644&mode=0600", "mode", "0644");
    check_query("recursive", "recursive", "");
    check_query("x=1", "mode", NULL);
    check_query(NULL, "mode", NULL);
    check_query("mode=%zz&mode=0700", "mode", "0700");
    check_query("mode=0700;x=1", "mode", NULL);
    check_query("a+b=c+d", "a b", "c d");
}

static void check_json(const char *in, size_t n, const char *out)
{
    json_buf b = {0};
    json_buf_string(&b, in, n);
    char *s = json_buf_steal(&b, NULL);
    CHECK_STR_EQ(s, out);
    free(s);
}

TEST(go_json_strings)
{
    check_json("plain", 5, "\"plain\"");
    check_json("<a&b>", 5, "\"\\u003ca\\u0026b\\u003e\"");
    check_json("q\"\\/", 4, "\"q\\\"\\\\/\"");
    check_json("\n\r\t\x01\x1f", 5, "\"\\n\\r\\t\\u0001\\u001f\"");
    check_json("bad\xff\xfe", 5, "\"bad\\ufffd\\ufffd\"");
    check_json("\xc3\xa9", 2, "\"\xc3\xa9\"");
    check_json("\xc3", 1, "\"\\ufffd\"");
    check_json("\xe2\x80\xa8", 3, "\"\\u2028\"");
    check_json("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""); /* surrogate */
    check_json("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"");            /* overlong */
    check_json("\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"");
    check_json("a\0b", 3, "\"a\\u0000b\"");
}

TEST(error_body)
{
    char *s = rest_error_body(STATUS_NOT_FOUND, "path does not exist within the sandbox", NULL);
    CHECK_STR_EQ(
        s, "{\"code\":\"NOT_FOUND\",\"message\":\"path does not exist within the sandbox\"}\n");
    free(s);
    s = rest_error_body(STATUS_CONFLICT, "<x>", NULL);
    CHECK_STR_EQ(s, "{\"code\":\"CONFLICT\",\"message\":\"\\u003cx\\u003e\"}\n");
    free(s);
}

TEST(mode)
{
    mode_t m = 0;
    CHECK_INT_EQ(rest_parse_mode("0644", &m), 0);
    CHECK_INT_EQ(m, 0644);
    CHECK_INT_EQ(rest_parse_mode("0000", &m), 0);
    CHECK_INT_EQ(m, 0);
    CHECK_INT_EQ(rest_parse_mode("0777", &m), 0);
    CHECK_INT_EQ(m, 0777);
    const char *bad[] = {"0999", "777", "abcd", "01777", "", "1644", "0 64", "0644\n", "+644"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_INT_EQ(rest_parse_mode(bad[i], &m), -EINVAL);
}

static void check_range(const char *h, int64_t size, rest_range_result want, int64_t start,
                        int64_t len)
{
    rest_range r = {-1, -1};
    rest_range_result got = rest_range_parse(h, size, &r);
    CHECK_INT_EQ(got, want);
    if (want == RANGE_SINGLE && got == RANGE_SINGLE) {
        CHECK_INT_EQ(r.start, start);
        CHECK_INT_EQ(r.length, len);
    }
}

TEST(range)
{
    check_range(NULL, 100, RANGE_NONE, 0, 0);
    check_range("bytes=0-9", 100, RANGE_SINGLE, 0, 10);
    check_range("bytes=90-", 100, RANGE_SINGLE, 90, 10);
    check_range("bytes=-10", 100, RANGE_SINGLE, 90, 10);
    check_range("bytes=-1000", 100, RANGE_SINGLE, 0, 100);
    check_range("bytes=50-1000", 100, RANGE_SINGLE, 50, 50);
    check_range("bytes=100-", 100, RANGE_NO_OVERLAP, 0, 0);
    check_range("bytes=0-", 0, RANGE_NO_OVERLAP, 0, 0);
    check_range("bytes=-0", 100, RANGE_NO_OVERLAP, 0, 0);
    check_range("bytes=5-2", 100, RANGE_INVALID, 0, 0);
    check_range("bytes=x-2", 100, RANGE_INVALID, 0, 0);
    check_range("bytes=1", 100, RANGE_INVALID, 0, 0);
    check_range("chars=1-2", 100, RANGE_INVALID, 0, 0);
    check_range("bytes=--5", 100, RANGE_INVALID, 0, 0);
    check_range("bytes=0-1,4-5", 100, RANGE_MULTI, 0, 0);
    check_range("bytes=0-1,200-300", 100, RANGE_SINGLE, 0, 2);
    check_range("bytes=,0-1,", 100, RANGE_SINGLE, 0, 2);
    check_range("bytes=99999999999999999999-", 100, RANGE_INVALID, 0, 0);
    check_range("bytes=0-99999999999999999999", 100, RANGE_INVALID, 0, 0);
    check_range("bytes=0-50,0-60", 100, RANGE_NONE, 0, 0); /* overlapping sum > size */
}

TEST(range_all)
{
    rest_range *v = NULL;
    size_t n = 0;
    CHECK_INT_EQ(rest_range_parse_all("bytes=0-1, 4-5,-2", 100, &v, &n), RANGE_MULTI);
    CHECK_INT_EQ(n, 3);
    if (n == 3) {
        CHECK_INT_EQ(v[0].start, 0);
        CHECK_INT_EQ(v[0].length, 2);
        CHECK_INT_EQ(v[1].start, 4);
        CHECK_INT_EQ(v[2].start, 98);
        CHECK_INT_EQ(v[2].length, 2);
    }
    free(v);
    CHECK_INT_EQ(rest_range_parse_all("bytes=0-1,x", 100, &v, &n), RANGE_INVALID);
    CHECK(v == NULL);
    CHECK_INT_EQ(rest_range_parse_all("bytes=0-99,0-1", 100, &v, &n), RANGE_NONE);
    CHECK(v == NULL);
}

TEST(http_dates)
{
    time_t t = 0;
    char text[64];
    CHECK_INT_EQ(rest_http_date_parse("Tue, 14 Nov 2023 22:13:20 GMT", &t), 0);
    CHECK_INT_EQ(t, 1700000000);
    CHECK_INT_EQ(rest_http_date_parse("Tuesday, 14-Nov-23 22:13:20 GMT", &t), 0);
    CHECK_INT_EQ(t, 1700000000);
    CHECK_INT_EQ(rest_http_date_parse("Tue Nov 14 22:13:20 2023", &t), 0);
    CHECK_INT_EQ(t, 1700000000);
    CHECK_INT_EQ(rest_http_date_parse("yesterday", &t), -EINVAL);
    CHECK_INT_EQ(rest_http_date_parse("Tue, 14 Nov 2023 22:13:20 GMT junk", &t), -EINVAL);
    rest_http_date_format(1700000000, text, sizeof(text));
    CHECK_STR_EQ(text, "Tue, 14 Nov 2023 22:13:20 GMT");
    rest_rfc3339_format(1700000000, text, sizeof(text));
    CHECK_STR_EQ(text, "2023-11-14T22:13:20Z");
}

TEST(preconditions)
{
    bool use = false;
    const char *now = "Tue, 14 Nov 2023 22:13:20 GMT", *past = "Tue, 14 Nov 2023 21:13:20 GMT";
    time_t m = 1700000000;
    CHECK_INT_EQ(rest_check_preconditions(true, m, NULL, NULL, NULL, now, NULL, NULL, &use),
                 COND_NOT_MODIFIED);
    CHECK_INT_EQ(rest_check_preconditions(true, m, NULL, NULL, NULL, past, NULL, NULL, &use),
                 COND_PROCEED);
    CHECK_INT_EQ(rest_check_preconditions(true, m, NULL, past, NULL, NULL, NULL, NULL, &use),
                 COND_PRECONDITION_FAILED);
    CHECK_INT_EQ(rest_check_preconditions(true, m, NULL, now, NULL, NULL, NULL, NULL, &use),
                 COND_PROCEED);
    CHECK_INT_EQ(rest_check_preconditions(true, m, "*", past, NULL, NULL, NULL, NULL, &use),
                 COND_PROCEED);
    CHECK_INT_EQ(rest_check_preconditions(true, m, "\"a\"", NULL, NULL, NULL, NULL, NULL, &use),
                 COND_PRECONDITION_FAILED);
    CHECK_INT_EQ(rest_check_preconditions(true, m, NULL, NULL, "*", NULL, NULL, NULL, &use),
                 COND_NOT_MODIFIED);
    CHECK_INT_EQ(rest_check_preconditions(true, m, NULL, NULL, "\"x\"", now, NULL, NULL, &use),
                 COND_PROCEED);
    CHECK_INT_EQ(rest_check_preconditions(true, m, NULL, NULL, NULL, NULL, "bytes=0-1", now, &use),
                 COND_PROCEED);
    CHECK(use);
    rest_check_preconditions(true, m, NULL, NULL, NULL, NULL, "bytes=0-1", past, &use);
    CHECK(!use);
    rest_check_preconditions(true, m, NULL, NULL, NULL, NULL, "bytes=0-1", "\"e\"", &use);
    CHECK(!use);
}

TEST(multipart_content_type)
{
    CHECK(rest_is_multipart_form("multipart/form-data; boundary=x"));
    CHECK(rest_is_multipart_form("Multipart/Form-Data;boundary=x"));
    CHECK(rest_is_multipart_form("multipart/form-data"));
    CHECK(!rest_is_multipart_form("multipart/form-datax"));
    CHECK(!rest_is_multipart_form("multipart/mixed; boundary=x"));
    CHECK(!rest_is_multipart_form("application/octet-stream"));
    CHECK(!rest_is_multipart_form(NULL));
}
