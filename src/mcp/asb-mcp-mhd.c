/* dlopen of libmicrohttpd for `asb mcp --listen` (see asb-mcp-mhd.h for why). */
#include <pthread.h>
#include <stdio.h>

#include "basic/dlopen-util.h"
#include "mcp/asb-mcp-mhd.h"

/* The SONAME of libmicrohttpd's ABI in the distributions we build on (Debian 12: 0.9.75). */
#define LIBMICROHTTPD_SONAME "libmicrohttpd.so.12"

mcp_mhd_api mcp_mhd;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_result;

static void load(void)
{
    mcp_mhd_api a = {0};
    const dlopen_symbol symbols[] = {
        DLOPEN_SYMBOL("MHD_start_daemon", a.start_daemon),
        DLOPEN_SYMBOL("MHD_stop_daemon", a.stop_daemon),
        DLOPEN_SYMBOL("MHD_create_response_from_buffer", a.create_response_from_buffer),
        DLOPEN_SYMBOL("MHD_create_response_from_callback", a.create_response_from_callback),
        DLOPEN_SYMBOL("MHD_add_response_header", a.add_response_header),
        DLOPEN_SYMBOL("MHD_queue_response", a.queue_response),
        DLOPEN_SYMBOL("MHD_destroy_response", a.destroy_response),
        DLOPEN_SYMBOL("MHD_lookup_connection_value", a.lookup_connection_value),
    };
    char err[256] = "";
    load_result = dlopen_symbols(LIBMICROHTTPD_SONAME, symbols,
                                 sizeof(symbols) / sizeof(symbols[0]), err, sizeof(err));
    if (load_result < 0) {
        fprintf(stderr, "asb mcp: cannot load libmicrohttpd: %s\n", err);
        return;
    }
    mcp_mhd = a;
}

int mcp_mhd_load(void)
{
    pthread_once(&load_once, load);
    return load_result;
}
