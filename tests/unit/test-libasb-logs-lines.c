/* The line work of asb_sandbox_logs() (--tail, --since, --timestamps), at every chunk split. */
#include <stdlib.h>
#include <string.h>

#include "libasb/libasb-logs-lines.h"
#include "unit.h"

static int collect(const char *data, size_t len, void *payload)
{
    return buf_append(payload, data, len) < 0;
}

/* Feeds text in chunks of `step` bytes (times: one chunk at offset 0 at t0, one at offset 5 at
 * t1), flushes, and returns what was delivered (owned). */
static char *run_lines(const char *text, size_t step, long long tail, int64_t since, bool stamps)
{
    buf out = BUF_INIT;
    off_t off[] = {0, 5};
    int64_t ns[] = {1000000000LL, 2000000000LL};
    log_times t = {off, ns, 2};
    log_lines l = {.cb = collect,
                   .payload = &out,
                   .line_ns = -1,
                   .tail = tail,
                   .collecting = tail >= 0,
                   .since_ns = since,
                   .timestamps = stamps};
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i += step)
        CHECK_INT_EQ(log_lines_feed(&l, text + i, i + step > n ? n - i : step, (off_t)i, &t), 0);
    CHECK_INT_EQ(log_lines_end_collect(&l), 0);
    CHECK_INT_EQ(log_lines_flush(&l), 0);
    log_lines_done(&l);
    char *s = out.data ? buf_steal(&out, NULL) : strdup("");
    return s;
}

#define CHECK_LINES(text, tail, since, stamps, want)                                               \
    for (size_t _step = 1; _step <= strlen(text); _step++) {                                       \
        char *_s = run_lines(text, _step, tail, since, stamps);                                    \
        CHECK_STR_EQ(_s, want);                                                                    \
        free(_s);                                                                                  \
    }

TEST(tail)
{
    CHECK_LINES("a\nbb\nccc\n", -1, 0, false, "a\nbb\nccc\n");
    CHECK_LINES("a\nbb\nccc\n", 2, 0, false, "bb\nccc\n");
    CHECK_LINES("a\nbb\nccc\n", 0, 0, false, "");
    CHECK_LINES("a\nbb\nccc\n", 9, 0, false, "a\nbb\nccc\n");
    CHECK_LINES("a\nbb\npart", 1, 0, false, "part"); /* a last line without its newline */
    CHECK_LINES("a\nbb\npart", 2, 0, false, "bb\npart");
}

TEST(since_and_timestamps)
{
    /* "a\nbb\n" starts in the chunk at 0 (t = 1 s), "ccc\n" at offset 5 (t = 2 s) */
    CHECK_LINES("a\nbb\nccc\n", -1, 1500000000LL, false, "ccc\n");
    CHECK_LINES("a\nbb\nccc\n", -1, 0, true,
                "1970-01-01T00:00:01.000000000Z a\n1970-01-01T00:00:01.000000000Z bb\n"
                "1970-01-01T00:00:02.000000000Z ccc\n");
    CHECK_LINES("a\nbb\nccc\n", 1, 0, true, "1970-01-01T00:00:02.000000000Z ccc\n");
}
