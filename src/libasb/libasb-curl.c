/* dlopen of libcurl on first use (see libasb-curl.h for why). */
#include <pthread.h>

#include "shared/dlopen-util.h"
#include "libasb/libasb-curl.h"
#include "libasb/libasb-internal.h"

/* The SONAME of libcurl's ABI (unchanged since curl 7.16, 2006). */
#define LIBCURL_SONAME "libcurl.so.4"

asbi_curl_api asbi_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];

static void load(void)
{
    asbi_curl_api a = {0};
    CURLcode (*global_init)(long flags) = NULL;
    const dlopen_symbol symbols[] = {
        DLOPEN_SYMBOL("curl_free", a.free),
        DLOPEN_SYMBOL("curl_easy_init", a.easy_init),
        DLOPEN_SYMBOL("curl_easy_cleanup", a.easy_cleanup),
        DLOPEN_SYMBOL("curl_easy_reset", a.easy_reset),
        DLOPEN_SYMBOL("curl_easy_setopt", a.easy_setopt),
        DLOPEN_SYMBOL("curl_easy_getinfo", a.easy_getinfo),
        DLOPEN_SYMBOL("curl_easy_perform", a.easy_perform),
        DLOPEN_SYMBOL("curl_easy_strerror", a.easy_strerror),
        DLOPEN_SYMBOL("curl_easy_escape", a.easy_escape),
        DLOPEN_SYMBOL("curl_slist_append", a.slist_append),
        DLOPEN_SYMBOL("curl_slist_free_all", a.slist_free_all),
        DLOPEN_SYMBOL("curl_global_init", global_init),
    };
    api_error e = API_ERROR_INIT;
    if (dlopen_symbols(LIBCURL_SONAME, symbols, sizeof(symbols) / sizeof(symbols[0]), &e) < 0) {
        snprintf(load_error, sizeof(load_error), "%s", e.message ? e.message : "out of memory");
        api_error_clear(&e);
        return;
    }
    CURLcode rc = global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        snprintf(load_error, sizeof(load_error), "curl_global_init: %s", a.easy_strerror(rc));
        return;
    }
    asbi_curl = a;
}

int asbi_curl_load(void)
{
    pthread_once(&load_once, load);
    if (load_error[0])
        return asbi_error_set(ASB_ERROR, 0, NULL, "cannot load libcurl: %s", load_error);
    return ASB_OK;
}
