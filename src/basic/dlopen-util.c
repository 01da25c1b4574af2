#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "basic/dlopen-util.h"

int dlopen_symbols(const char *soname, const dlopen_symbol *symbols, size_t n, char *errbuf,
                   size_t errbuf_size)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(errbuf, errbuf_size, "%s", e ? e : soname);
        return -ENOENT;
    }
    for (size_t i = 0; i < n; i++) {
        *symbols[i].ptr = dlsym(lib, symbols[i].name);
        if (!*symbols[i].ptr) {
            snprintf(errbuf, errbuf_size, "%s: no symbol %s", soname, symbols[i].name);
            return -ENOSYS;
        }
    }
    return 0;
}
