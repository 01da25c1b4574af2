/* Minimal unit-test harness: TEST(name) { CHECK(...); } in tests/unit/test-<module>.c.
 * Each test binary prints `ok - name` / `not ok - name` lines and a final `N passed, N failed`,
 * and exits non-zero if any test failed. Header-only: include it from exactly one file. */
#pragma once

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*unit_fn)(void);
static struct unit_case {
    const char *name;
    unit_fn fn;
} unit_cases[256];
static unsigned unit_ncases;
static unsigned unit_current_failures;

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void register_##name(void)                                \
    {                                                                                              \
        unit_cases[unit_ncases++] = (struct unit_case){#name, test_##name};                       \
    }                                                                                              \
    static void test_##name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("#   %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                    \
            unit_current_failures++;                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                                         \
    do {                                                                                           \
        long long _a = (long long)(a), _b = (long long)(b);                                        \
        if (_a != _b) {                                                                            \
            printf("#   %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, _a,   \
                   _b);                                                                            \
            unit_current_failures++;                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *_a = (a), *_b = (b);                                                           \
        if (!_a || !_b || strcmp(_a, _b) != 0) {                                                   \
            printf("#   %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a, #b,   \
                   _a ? _a : "(null)", _b ? _b : "(null)");                                        \
            unit_current_failures++;                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    unsigned passed = 0, failed = 0;
    for (unsigned i = 0; i < unit_ncases; i++) {
        if (argc > 1 && strcmp(argv[1], unit_cases[i].name) != 0)
            continue;
        unit_current_failures = 0;
        unit_cases[i].fn();
        if (unit_current_failures == 0) {
            passed++;
            printf("ok - %s\n", unit_cases[i].name);
        } else {
            failed++;
            printf("not ok - %s\n", unit_cases[i].name);
        }
        fflush(stdout);
    }
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}
