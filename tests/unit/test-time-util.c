#include <time.h>

#include "basic/time-util.h"
#include "unit.h"

TEST(now_msec_follows_now_usec)
{
    usec_t before = now_usec(CLOCK_MONOTONIC);
    int64_t ms = now_msec(CLOCK_MONOTONIC);
    usec_t after = now_usec(CLOCK_MONOTONIC);
    CHECK(ms >= (int64_t)(before / USEC_PER_MSEC));
    CHECK(ms <= (int64_t)(after / USEC_PER_MSEC));
    /* Signed: a deadline in the past gives a negative time left. */
    CHECK(now_msec(CLOCK_MONOTONIC) - (ms + 1000) < 0);
}

static int64_t ts_usec(struct timespec ts)
{
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

TEST(timespec_realtime_after_adds_and_normalises)
{
    static const usec_t deltas[] = {
        0, 1, 999999, 1000000, 1500000, 200 * USEC_PER_MSEC, 10 * USEC_PER_SEC};
    for (size_t i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++) {
        int64_t before = (int64_t)now_usec(CLOCK_REALTIME);
        struct timespec ts = timespec_realtime_after(deltas[i]);
        int64_t after = (int64_t)now_usec(CLOCK_REALTIME);
        CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
        CHECK(ts_usec(ts) >= before + (int64_t)deltas[i]);
        CHECK(ts_usec(ts) <= after + (int64_t)deltas[i]);
    }
}
