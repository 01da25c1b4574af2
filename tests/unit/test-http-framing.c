#include <errno.h>
#include <string.h>

#include "basic/macro.h"
#include "shared/http-framing.h"
#include "unit.h"

#define F(n, v)                                                                                    \
    {                                                                                              \
        n, sizeof(n) - 1, v, sizeof(v) - 1                                                         \
    }

static int check(const http_field *f, size_t n, bool http11)
{
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    return http_framing_check(f, n, http11, &e) == 0 ? 0 : (int)status_http(e.code);
}

TEST(accepts_plain_requests)
{
    http_field a[] = {F("Host", "x"), F("Content-Length", "5")};
    CHECK_INT_EQ(check(a, 2, true), 0);
    http_field b[] = {F("host", ""), F("Transfer-Encoding", " Chunked ")};
    CHECK_INT_EQ(check(b, 2, true), 0);
    CHECK_INT_EQ(check(NULL, 0, false), 0); /* HTTP/1.0 needs no Host */
    http_field c[] = {F("Transfer-Encoding", "gzip")};
    CHECK_INT_EQ(check(c, 1, false), 0); /* HTTP/1.0 ignores Transfer-Encoding */
}

TEST(content_length)
{
    http_field same[] = {F("Host", "x"), F("Content-Length", "5"), F("content-length", " 5")};
    CHECK_INT_EQ(check(same, 3, true), 0);
    http_field differ[] = {F("Host", "x"), F("Content-Length", "5"), F("Content-Length", "6")};
    CHECK_INT_EQ(check(differ, 3, true), 400);
    http_field bad[] = {F("Host", "x"), F("Content-Length", "+5")};
    CHECK_INT_EQ(check(bad, 2, true), 400);
    http_field empty[] = {F("Host", "x"), F("Content-Length", "")};
    CHECK_INT_EQ(check(empty, 2, true), 400);
    http_field chunked[] = {F("Host", "x"), F("Content-Length", "5"), F("Content-Length", "6"),
                            F("Transfer-Encoding", "chunked")};
    CHECK_INT_EQ(check(chunked, 4, true), 0); /* Go drops Content-Length for chunked */
}

TEST(field_names)
{
    http_field space[] = {F("Host", "x"), F("Content-Length ", "5")};
    CHECK_INT_EQ(check(space, 2, true), 400);
    http_field empty[] = {F("Host", "x"), F("", "5")};
    CHECK_INT_EQ(check(empty, 2, true), 400);
    http_field odd[] = {F("Host", "x"), F("X-A!#$%&'*+-.^_`|~9", "ok")};
    CHECK_INT_EQ(check(odd, 2, true), 0);
}

TEST(host_and_transfer_encoding)
{
    http_field none[] = {F("Accept", "*/*")};
    _cleanup_(api_error_clear) api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(http_framing_check(none, 1, true, &e), -EINVAL);
    CHECK_INT_EQ(status_http(e.code), 400);
    CHECK_STR_EQ(e.message, "400 Bad Request: missing required Host header");
    http_field two[] = {F("Host", "a"), F("Host", "b")};
    CHECK_INT_EQ(check(two, 2, false), 400);
    http_field gz[] = {F("Host", "x"), F("Transfer-Encoding", "gzip, chunked")};
    CHECK(http_framing_check(gz, 2, true, &e) < 0);
    CHECK_INT_EQ(status_http(e.code), 501);
    CHECK_STR_EQ(status_http_reason((int)status_http(e.code)), "Not Implemented");
    CHECK_STR_EQ(e.message, "Unsupported transfer encoding");
    http_field twice[] = {F("Host", "x"), F("Transfer-Encoding", "chunked"),
                          F("Transfer-Encoding", "chunked")};
    CHECK_INT_EQ(check(twice, 3, true), 501);
}
