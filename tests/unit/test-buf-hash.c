#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/hash.h"
#include "unit.h"

TEST(buf_grows_and_terminates)
{
    _cleanup_buf_ buf b = BUF_INIT;
    CHECK_INT_EQ(buf_append_str(&b, "abc"), 0);
    CHECK_INT_EQ(b.len, 3);
    CHECK(strcmp(b.data, "abc") == 0);
    for (int i = 0; i < 1000; i++)
        CHECK_INT_EQ(buf_appendf(&b, "%03d", i % 1000), 0);
    CHECK_INT_EQ(b.len, 3 + 3000);
    CHECK(b.data[b.len] == '\0');
    CHECK(memcmp(b.data + 3 + 3 * 999, "999", 3) == 0);
    CHECK(b.cap > b.len);
}

TEST(buf_consume_keeps_the_rest)
{
    _cleanup_buf_ buf b = BUF_INIT;
    CHECK_INT_EQ(buf_append(&b, "hello world", 11), 0);
    buf_consume(&b, 6);
    CHECK_INT_EQ(b.len, 5);
    CHECK(strcmp(b.data, "world") == 0);
    buf_consume(&b, 99);
    CHECK_INT_EQ(b.len, 0);
    CHECK(strcmp(b.data, "") == 0);
}

TEST(buf_steal_hands_out_and_empties)
{
    buf b = BUF_INIT;
    size_t n = 7;
    char *empty = buf_steal(&b, &n);
    CHECK(empty && strcmp(empty, "") == 0);
    CHECK_INT_EQ(n, 0);
    free(empty);
    CHECK_INT_EQ(buf_append_byte(&b, 'x'), 0);
    char *s = buf_steal(&b, &n);
    CHECK(s && strcmp(s, "x") == 0);
    CHECK_INT_EQ(n, 1);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
    free(s);
}

TEST(buf_refuses_overflow)
{
    _cleanup_buf_ buf b = BUF_INIT;
    CHECK_INT_EQ(buf_append_str(&b, "x"), 0);
    CHECK_INT_EQ(buf_reserve(&b, SIZE_MAX), -ENOMEM);
    CHECK(strcmp(b.data, "x") == 0);
}

TEST(buf_append_fd_reads_to_eof)
{
    int p[2];
    CHECK_INT_EQ(pipe(p), 0);
    /* More than one read's worth, so the loop has to go round. */
    char chunk[3000];
    memset(chunk, 'x', sizeof(chunk));
    CHECK_INT_EQ(write(p[1], chunk, sizeof(chunk)), (int)sizeof(chunk));
    CHECK_INT_EQ(write(p[1], chunk, sizeof(chunk)), (int)sizeof(chunk));
    close(p[1]);
    buf b = BUF_INIT;
    CHECK_INT_EQ(buf_append_str(&b, "head:"), 0);
    CHECK_INT_EQ(buf_append_fd(&b, p[0]), 0);
    CHECK_INT_EQ(b.len, 5 + 2 * sizeof(chunk));
    CHECK(memcmp(b.data, "head:xxx", 8) == 0);
    CHECK_INT_EQ(b.data[b.len], '\0');
    close(p[0]);
    /* A closed fd is an error, and what was there stays. */
    CHECK_INT_EQ(buf_append_fd(&b, p[0]), -EBADF);
    CHECK_INT_EQ(b.len, 5 + 2 * sizeof(chunk));
    buf_done(&b);
}

TEST(fnv1a_known_values)
{
    /* Reference values of FNV-1a (Fowler/Noll/Vo test vectors). */
    CHECK_INT_EQ(fnv1a32_str(""), 0x811c9dc5u);
    CHECK_INT_EQ(fnv1a32_str("a"), 0xe40c292cu);
    CHECK_INT_EQ(fnv1a32_str("foobar"), 0xbf9cf968u);
    CHECK(fnv1a64_str("") == UINT64_C(0xcbf29ce484222325));
    CHECK(fnv1a64_str("a") == UINT64_C(0xaf63dc4c8601ec8c));
    CHECK(fnv1a64_str("foobar") == UINT64_C(0x85944171f73967e8));
    uint32_t h = fnv1a32_update(FNV1A32_INIT, "foo", 3);
    CHECK_INT_EQ(fnv1a32_update(h, "bar", 3), 0xbf9cf968u);
}

TEST(strdup_printf_formats_a_new_string)
{
    _cleanup_free_ char *s = strdup_printf("%s-%d", "pod", 7);
    CHECK(s && strcmp(s, "pod-7") == 0);
    _cleanup_free_ char *e = strdup_printf("%s", "");
    CHECK(e && strcmp(e, "") == 0);
}
