/* A library loaded when first needed instead of linked: for libraries whose load (relocations,
 * constructors, their own dependencies) costs every process that links them, while few runs use
 * them (libcurl in libasb, libmicrohttpd in `asb mcp --listen`). Never logs. */
#pragma once

#include <stddef.h>

#include "shared/status.h"

/* One symbol to resolve: its name and where its address goes (a function pointer's storage). */
typedef struct dlopen_symbol {
    const char *name;
    void **ptr;
} dlopen_symbol;

#define DLOPEN_SYMBOL(name, fp)                                                                    \
    {                                                                                              \
        name, (void **)&(fp)                                                                       \
    }

/* Loads soname (RTLD_NOW | RTLD_LOCAL; never unloaded) and resolves every symbol. Returns 0, or
 * -ENOENT (library missing: the loader's words) / -ENOSYS ("SONAME: no symbol NAME") with *err
 * saying why. Not thread-safe: callers run it once (pthread_once). The pointers are left
 * untouched on failure when the library is missing, partly filled when a symbol is. */
int dlopen_symbols(const char *soname, const dlopen_symbol *symbols, size_t n, api_error *err);
