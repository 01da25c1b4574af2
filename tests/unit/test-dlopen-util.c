/* dlopen_symbols: a library resolved, a library missing, a symbol missing. */
#include <errno.h>
#include <string.h>

#include "shared/dlopen-util.h"
#include "unit.h"

TEST(resolves_symbols)
{
    size_t (*len)(const char *) = NULL;
    const dlopen_symbol syms[] = {DLOPEN_SYMBOL("strlen", len)};
    api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(dlopen_symbols("libc.so.6", syms, 1, &e), 0);
    CHECK(len != NULL && len("abc") == 3);
    CHECK(e.message == NULL);
}

TEST(missing_library_and_symbol)
{
    void *p = NULL;
    const dlopen_symbol syms[] = {DLOPEN_SYMBOL("asb_no_such_symbol", p)};
    api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(dlopen_symbols("libasb-no-such-library.so.9", syms, 1, &e), -ENOENT);
    CHECK(e.message && strstr(e.message, "libasb-no-such-library.so.9"));
    CHECK_INT_EQ(dlopen_symbols("libc.so.6", syms, 1, &e), -ENOSYS);
    CHECK_STR_EQ(e.message, "libc.so.6: no symbol asb_no_such_symbol");
    CHECK(p == NULL);
    api_error_clear(&e);
}
