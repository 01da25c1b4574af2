/* libcurl, loaded when a transfer first needs it (dlopen), not at every process start: linking it
 * brings ~30 libraries (GnuTLS, Kerberos, LDAP, ...) whose relocations and constructors cost a
 * few ms of CPU in every `asb` run, while most runs talk plain HTTP to a loopback server
 * (libasb-http.c). Code of src/libasb includes this header instead of <curl/curl.h> and calls
 * the curl_* names as usual: they resolve to the loaded functions. asbi_curl_load() must have
 * returned ASB_OK before any of them is called. */
#pragma once

#define CURL_DISABLE_TYPECHECK 1 /* the checks are macros named curl_easy_setopt & co. */
#include <curl/curl.h>

typedef struct asbi_curl_api {
    void (*free)(void *p);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *curl);
    void (*easy_reset)(CURL *curl);
    CURLcode (*easy_setopt)(CURL *curl, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *curl, CURLINFO info, ...);
    CURLcode (*easy_perform)(CURL *curl);
    const char *(*easy_strerror)(CURLcode code);
    char *(*easy_escape)(CURL *curl, const char *s, int length);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
    void (*slist_free_all)(struct curl_slist *list);
} asbi_curl_api;

/* Filled by asbi_curl_load(); read-only afterwards. */
extern asbi_curl_api asbi_curl;

/* Loads libcurl and runs curl_global_init, once per process (thread-safe). Returns ASB_OK, or
 * ASB_ERROR with the last error set when the library cannot be loaded or initialised. */
int asbi_curl_load(void);

#define curl_free asbi_curl.free
#define curl_easy_init asbi_curl.easy_init
#define curl_easy_cleanup asbi_curl.easy_cleanup
#define curl_easy_reset asbi_curl.easy_reset
#undef curl_easy_setopt /* curl.h passes the arguments through a macro of this name */
#undef curl_easy_getinfo
#define curl_easy_setopt asbi_curl.easy_setopt
#define curl_easy_getinfo asbi_curl.easy_getinfo
#define curl_easy_perform asbi_curl.easy_perform
#define curl_easy_strerror asbi_curl.easy_strerror
#define curl_easy_escape asbi_curl.easy_escape
#define curl_slist_append asbi_curl.slist_append
#define curl_slist_free_all asbi_curl.slist_free_all
