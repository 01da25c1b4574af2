/* `asb mcp`: reaching the control plane and a sandbox, with errors phrased for an agent (what is
 * wrong and what to do about it) instead of printed (cli_sandbox_open prints; we return text). */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "mcp/asb-mcp.h"

bool mcp_via_router;

char *mcp_error_text(const char *context)
{
    const asb_error *e = asb_error_last();
    const char *msg = e && e->message && *e->message ? e->message : "unknown error";
    if (e && e->code == ASB_ECONNECT)
        return strdup_printf("%s%scannot reach the Agent Sandbox server (%s); is `asb serve` running?",
                     context ? context : "", context ? ": " : "", msg);
    return strdup_printf("%s%s%s", context ? context : "", context ? ": " : "", msg);
}

static void client_log(int level, const char *message, void *payload)
{
    if (level <= ASB_LOG_WARNING)
        fprintf(stderr, "asb mcp: %s\n", message);
}

int mcp_client_new(asb_client **ret, char **ret_error)
{
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.server = cli_global.server;
    o.token = cli_global.token;
    o.log_cb = client_log;
    if (asb_client_new(ret, &o) != ASB_OK) {
        *ret_error = mcp_error_text("no Agent Sandbox server configured");
        return -1;
    }
    return 0;
}

/* The sandbox a claim is bound to, or NULL (not bound yet). Borrowed from claim. */
static const char *claim_sandbox(const json_t *claim)
{
    const char *sn = json_string_value(
        json_object_get(json_object_get(json_object_get(claim, "status"), "sandbox"), "name"));
    if (!sn || !*sn)
        sn = json_string_value(
            json_object_get(json_object_get(json_object_get(claim, "metadata"), "annotations"),
                            "agents.x-k8s.io/sandbox-name"));
    return sn && *sn ? sn : NULL;
}

int mcp_sandbox_resolve(asb_client *cl, const char *ns, const char *name, char **ret_sandbox,
                        char **ret_error)
{
    /* Claims first: the tools hand out claim names, and a claim named like a sandbox is its own. */
    _cleanup_free_ char *text = NULL;
    int r = asb_object_get(&text, cl, "sandboxclaim", ns, name);
    if (r == ASB_OK) {
        json_t *claim = json_loads(text, 0, NULL);
        const char *sn = claim_sandbox(claim);
        if (!sn) {
            json_decref(claim);
            *ret_error = strdup_printf("sandbox claim \"%s\" in namespace \"%s\" has no sandbox yet; wait "
                               "a moment and try again, or create a new one with create_sandbox",
                               name, ns);
            return -1;
        }
        *ret_sandbox = strdup(sn);
        json_decref(claim);
        return *ret_sandbox ? 0 : -1;
    }
    if (r != ASB_ENOTFOUND) {
        *ret_error = mcp_error_text(name);
        return -1;
    }
    r = asb_object_get(NULL, cl, "sandbox", ns, name);
    if (r == ASB_ENOTFOUND) {
        *ret_error = strdup_printf("unknown sandbox \"%s\" in namespace \"%s\": no SandboxClaim or Sandbox "
                           "has that name (create one with create_sandbox, or read the "
                           "asb://sandboxes resource for the existing ones)",
                           name, ns);
        return -1;
    }
    if (r != ASB_OK) {
        *ret_error = mcp_error_text(name);
        return -1;
    }
    *ret_sandbox = strdup(name);
    return *ret_sandbox ? 0 : -1;
}

int mcp_sandbox_open(asb_sandbox **ret, asb_client *cl, const char *ns, const char *name,
                     char **ret_error)
{
    _cleanup_free_ char *sn = NULL;
    if (mcp_sandbox_resolve(cl, ns, name, &sn, ret_error) < 0)
        return -1;
    /* Few retries, soon: a handle that stopped working is replaced rather than waited on. */
    asb_sandbox_options so = ASB_SANDBOX_OPTIONS_INIT;
    so.max_attempts = 2;
    so.retry_delay_ms = 100;
    int r = mcp_via_router ? asb_sandbox_open_via_router(ret, cl, ns, sn, &so)
                           : asb_sandbox_open(ret, cl, ns, sn, &so);
    if (r == ASB_OK)
        return 0;
    if (r == ASB_ECONFLICT)
        *ret_error = mcp_error_text("the sandbox cannot run commands or serve files now (it may "
                                    "be starting, suspended or stopped; try again shortly or "
                                    "create a new one)");
    else
        *ret_error = mcp_error_text(sn);
    return -1;
}

/* ---- the handle cache ---- */

typedef struct cached_sandbox {
    char *key; /* "ns/name" */
    asb_sandbox *sandbox;
    unsigned refs; /* under cache_lock: the cache's own while listed, plus one per running op */
    bool listed;
    struct cached_sandbox *next;
} cached_sandbox;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cached_sandbox *cache;

static void cached_unref_locked(cached_sandbox *c, bool *ret_free)
{
    *ret_free = --c->refs == 0;
}

static void cached_free(cached_sandbox *c)
{
    asb_sandbox_free(c->sandbox);
    free(c->key);
    free(c);
}

static void unlist_locked(cached_sandbox *c)
{
    for (cached_sandbox **p = &cache; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    c->listed = false;
}

static cached_sandbox *lookup(const char *key)
{
    pthread_mutex_lock(&cache_lock);
    cached_sandbox *c = cache;
    while (c && strcmp(c->key, key) != 0)
        c = c->next;
    if (c)
        c->refs++;
    pthread_mutex_unlock(&cache_lock);
    return c;
}

static cached_sandbox *open_and_cache(char *key, const char *ns, const char *name, char **ret_error)
{
    _cleanup_free_ char *k = key;
    asb_client *cl = NULL;
    asb_sandbox *sb = NULL;
    if (mcp_client_new(&cl, ret_error) < 0)
        return NULL;
    int r = mcp_sandbox_open(&sb, cl, ns, name, ret_error);
    asb_client_free(cl);
    if (r < 0)
        return NULL;
    cached_sandbox *c = calloc(1, sizeof(*c));
    if (!c) {
        asb_sandbox_free(sb);
        return NULL;
    }
    *c = (cached_sandbox){.key = TAKE_PTR(k), .sandbox = sb, .refs = 2, .listed = true};
    pthread_mutex_lock(&cache_lock);
    c->next = cache;
    cache = c;
    pthread_mutex_unlock(&cache_lock);
    return c;
}

static void release(cached_sandbox *c, bool stale)
{
    bool last = false, last2 = false;
    pthread_mutex_lock(&cache_lock);
    if (stale && c->listed) {
        unlist_locked(c);
        cached_unref_locked(c, &last);
    }
    cached_unref_locked(c, &last2);
    pthread_mutex_unlock(&cache_lock);
    if (last || last2)
        cached_free(c);
}

/* Whether a failure says the handle no longer reaches a sandbox (rather than the operation
 * failing there): no connection to its sockets, or the router unable to reach its backend
 * (502/503: nothing ran). */
static bool handle_stale(int r)
{
    return r == ASB_ECONNECT || (mcp_via_router && r == ASB_ESERVER);
}

int mcp_with_sandbox(const char *ns, const char *name, mcp_sandbox_op op, void *payload,
                     char **ret_error)
{
    char *key = strdup_printf("%s/%s", ns, name);
    if (!key)
        return ASB_ENOMEM;
    cached_sandbox *c = lookup(key);
    if (c) {
        free(key);
        int r = op(c->sandbox, payload);
        release(c, handle_stale(r));
        if (!handle_stale(r))
            return r;
        key = strdup_printf("%s/%s", ns, name);
        if (!key)
            return ASB_ENOMEM;
    }
    c = open_and_cache(key, ns, name, ret_error);
    if (!c)
        return ASB_ENOTFOUND;
    int r = op(c->sandbox, payload);
    release(c, handle_stale(r));
    return r;
}

void mcp_sandbox_forget(const char *ns, const char *name)
{
    _cleanup_free_ char *key = strdup_printf("%s/%s", ns, name);
    if (!key)
        return;
    cached_sandbox *c = lookup(key);
    if (c)
        release(c, true);
}

void mcp_sandbox_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    cached_sandbox *c = cache;
    cache = NULL;
    pthread_mutex_unlock(&cache_lock);
    for (cached_sandbox *n; c; c = n) {
        n = c->next;
        cached_free(c);
    }
}
