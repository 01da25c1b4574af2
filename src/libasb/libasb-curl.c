/* dlopen of libcurl on first use (see libasb-curl.h for why). */
#include <dlfcn.h>
#include <pthread.h>

#include "libasb/libasb-curl.h"
#include "libasb/libasb-internal.h"

/* The SONAME of libcurl's ABI (unchanged since curl 7.16, 2006). */
#define LIBCURL_SONAME "libcurl.so.4"

asbi_curl_api asbi_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p && !load_error[0])
        snprintf(load_error, sizeof(load_error), "%s: no symbol %s", LIBCURL_SONAME, name);
    return p;
}

static void load(void)
{
    /* Never closed: the handles and the global state live as long as the process. */
    void *lib = dlopen(LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(load_error, sizeof(load_error), "%s", e ? e : LIBCURL_SONAME ": cannot load");
        return;
    }
    asbi_curl_api a = {
        .free = sym(lib, "curl_free"),
        .easy_init = sym(lib, "curl_easy_init"),
        .easy_cleanup = sym(lib, "curl_easy_cleanup"),
        .easy_reset = sym(lib, "curl_easy_reset"),
        .easy_setopt = sym(lib, "curl_easy_setopt"),
        .easy_getinfo = sym(lib, "curl_easy_getinfo"),
        .easy_perform = sym(lib, "curl_easy_perform"),
        .easy_strerror = sym(lib, "curl_easy_strerror"),
        .easy_escape = sym(lib, "curl_easy_escape"),
        .slist_append = sym(lib, "curl_slist_append"),
        .slist_free_all = sym(lib, "curl_slist_free_all"),
    };
    CURLcode (*global_init)(long flags) = sym(lib, "curl_global_init");
    if (load_error[0])
        return;
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
