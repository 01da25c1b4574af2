#include <dlfcn.h>
#include <errno.h>

#include "shared/dlopen-util.h"

int dlopen_symbols(const char *soname, const dlopen_symbol *symbols, size_t n, api_error *err)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        return api_error_set_errno(err, -ENOENT, "%s", e ? e : soname);
    }
    for (size_t i = 0; i < n; i++) {
        *symbols[i].ptr = dlsym(lib, symbols[i].name);
        if (!*symbols[i].ptr)
            return api_error_set_errno(err, -ENOSYS, "%s: no symbol %s", soname, symbols[i].name);
    }
    return 0;
}
