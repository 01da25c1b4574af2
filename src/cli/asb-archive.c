/* dlopen of libarchive for `asb cp` (see asb-archive.h for why). */
#include <pthread.h>
#include <stdio.h>

#include "basic/macro.h"
#include "cli/asb-archive.h"
#include "shared/dlopen-util.h"

/* The SONAME of libarchive's ABI (Debian 12: 3.6.2). */
#define LIBARCHIVE_SONAME "libarchive.so.13"

cli_archive_api cli_archive;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_result;

static void load(void)
{
    cli_archive_api a = {0};
#define CLI_ARCHIVE_SYMBOL(name) DLOPEN_SYMBOL(#name, a.name),
    const dlopen_symbol symbols[] = {CLI_ARCHIVE_FUNCS(CLI_ARCHIVE_SYMBOL)};
#undef CLI_ARCHIVE_SYMBOL
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    load_result =
        dlopen_symbols(LIBARCHIVE_SONAME, symbols, sizeof(symbols) / sizeof(symbols[0]), &err);
    if (load_result < 0) {
        fprintf(stderr, "error: cannot load libarchive: %s\n",
                err.message ? err.message : "out of memory");
        return;
    }
    cli_archive = a;
}

int cli_archive_load(void)
{
    pthread_once(&load_once, load);
    return load_result;
}
