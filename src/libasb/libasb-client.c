/* The control-plane client: where the server and token come from (options, environment, state
 * directory) and the request/response verbs (over libasb-http.h's transports). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/state-files.h"
#include "libasb/libasb-http.h"
#include "libasb/libasb-internal.h"
#include "shared/claim-header.h"

#define DEFAULT_TIMEOUT_MS 30000L
#define DEFAULT_CONNECT_TIMEOUT_MS 10000L
#define MAX_REPLY (64u << 20)

void asbi_log(asb_client *c, int level, const char *fmt, ...)
{
    if (!c || !c->log_cb)
        return;
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (r < 0)
        return;
    c->log_cb(level, msg, c->log_payload);
    free(msg);
}

static char *default_state_dir(void)
{
    const char *e = getenv("ASB_STATE_DIR");
    if (e && *e)
        return strdup(e);
    if (geteuid() == 0)
        return strdup("/var/lib/asb");
    const char *home = getenv("HOME");
    char *s = NULL;
    if (asprintf(&s, "%s/.local/state/asb", home && *home ? home : "/tmp") < 0)
        return NULL;
    return s;
}

int asb_client_default_state_dir(char **out)
{
    *out = default_state_dir();
    return *out ? ASB_OK : ASB_ENOMEM;
}

/* Reads a small file and trims surrounding whitespace. Returns 0, -ENOENT..., or -ENOMEM. */
static int read_trimmed(const char *dir, const char *name, char **ret)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return -ENOMEM;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    free(path);
    if (fd < 0)
        return -errno;
    char content[4096];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, content + n, sizeof(content) - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        if (r == 0 || (n += (size_t)r) == sizeof(content) - 1)
            break;
    }
    close(fd);
    content[n] = '\0';
    char *s = content;
    while (*s && isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    while (len > 0 && isspace((unsigned char)s[len - 1]))
        s[--len] = '\0';
    if (len == 0)
        return -ENODATA;
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

/* True while an `asb serve` holds the state directory's lock: a server is running or starting. */
static bool server_lock_held(const char *state)
{
    char *path = NULL;
    if (asprintf(&path, "%s/" STATE_FILE_LOCK, state) < 0)
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
    free(path);
    if (fd < 0)
        return false;
    bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

/* `asb serve &` followed at once by a client: the server file appears when the server is ready.
 * A server that was just started may not even hold its lock yet (both processes are starting), so
 * a missing file is looked at again for up to SERVER_LOCK_GRACE_MS; once the directory's lock
 * says a server is starting, the client waits for the file (bounded), saying so. */
#define SERVER_LOCK_GRACE_MS 1000
#define SERVER_START_WAIT_MS 15000
#define SERVER_POLL_MS 20
static int read_server_file(asb_client *c, const char *state, char **ret)
{
    int r = read_trimmed(state, STATE_FILE_SERVER, ret);
    bool told = false;
    for (int waited = 0; r == -ENOENT; waited += SERVER_POLL_MS) {
        bool starting = server_lock_held(state);
        if (waited >= (starting ? SERVER_START_WAIT_MS : SERVER_LOCK_GRACE_MS))
            break;
        if (starting && !told) {
            asbi_log(c, ASB_LOG_INFO, "waiting for asb serve to start (state dir %s)", state);
            told = true;
        }
        nanosleep(&(struct timespec){.tv_nsec = SERVER_POLL_MS * 1000 * 1000}, NULL);
        r = read_trimmed(state, STATE_FILE_SERVER, ret);
    }
    return r;
}

static const char *nonempty_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A server URL without its trailing slashes, in place. */
static void trim_slashes(char *url)
{
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        url[--n] = '\0';
}

static int configure(asb_client *c, const asb_client_options *o)
{
    char *state = o && o->state_dir ? strdup(o->state_dir) : default_state_dir();
    if (!state)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    int ret = ASB_OK;
    const char *server = o && o->server ? o->server : nonempty_env("ASB_SERVER");
    if (server) {
        c->server = strdup(server);
    } else {
        int r = read_server_file(c, state, &c->server);
        if (r == -ENOMEM) {
            ret = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
            goto out;
        }
        if (r < 0) {
            ret = asbi_error_set(ASB_ECONFIG, 0, NULL,
                                 "no server configured: pass --server, set ASB_SERVER, or start "
                                 "`asb serve` (cannot read %s/server: %s)",
                                 state, strerror(-r));
            goto out;
        }
    }
    const char *token = o && o->token ? o->token : nonempty_env("ASB_TOKEN");
    if (token) {
        c->token = strdup(token);
    } else {
        int r = read_trimmed(state, "token", &c->token);
        if (r == -ENOMEM) {
            ret = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
            goto out;
        }
        if (r < 0) /* no token: requests go without one (a 401 will say so) */
            asbi_log(c, ASB_LOG_DEBUG, "no token (cannot read %s/token: %s)", state, strerror(-r));
    }
    if (!c->server || (token && !c->token)) {
        ret = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        goto out;
    }
    /* Like Go's http.ProxyFromEnvironment (kubectl): loopback never goes through a proxy. */
    const char *np = nonempty_env("NO_PROXY") ? nonempty_env("NO_PROXY") : nonempty_env("no_proxy");
    if (asprintf(&c->noproxy, "%s%slocalhost,127.0.0.1,::1", np ? np : "", np ? "," : "") < 0) {
        c->noproxy = NULL;
        ret = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        goto out;
    }
    trim_slashes(c->server);
    c->state_dirs_server = !server;
    if (server) { /* given, but perhaps the state directory's own */
        char *own = NULL;
        if (read_trimmed(state, STATE_FILE_SERVER, &own) == 0) {
            trim_slashes(own);
            c->state_dirs_server = strcmp(own, c->server) == 0;
        }
        free(own);
    }
    if (strncmp(c->server, "http://", 7) != 0 && strncmp(c->server, "https://", 8) != 0)
        ret = asbi_error_set(ASB_EINVAL, 0, NULL,
                             "server \"%s\": expected an http:// or https:// URL", c->server);
out:
    c->state_dir = state; /* kept: sandbox sockets live under <state>/run (asb_sandbox_open) */
    return ret;
}

ASB_PUBLIC int asb_client_new(asb_client **out, const asb_client_options *opts)
{
    if (!out)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_client_new: NULL out");
    if (opts && (opts->version == 0 || opts->version > ASB_CLIENT_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_client_options: unknown version %u",
                              opts->version);
    asb_client *c = calloc(1, sizeof(*c));
    if (!c)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    c->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    c->connect_timeout_ms = opts && opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms
                                                                 : DEFAULT_CONNECT_TIMEOUT_MS;
    if (opts) {
        c->log_cb = opts->log_cb;
        c->log_payload = opts->log_payload;
        if (opts->version >= 2) {
            c->warning_cb = opts->warning_cb;
            c->warning_payload = opts->warning_payload;
        }
    }
    int r = ASB_OK;
    if (opts && opts->version >= 2 && opts->field_validation) {
        const char *fv = opts->field_validation;
        if (strcmp(fv, "Strict") != 0 && strcmp(fv, "Warn") != 0 && strcmp(fv, "Ignore") != 0)
            r = asbi_error_set(ASB_EINVAL, 0, NULL,
                               "asb_client_options: field_validation \"%s\" is not Strict, Warn "
                               "or Ignore",
                               fv);
        else if (!(c->field_validation = strdup(fv)))
            r = asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    if (opts && opts->version >= 3)
        c->dry_run = opts->dry_run != 0;
    if (r == ASB_OK)
        r = configure(c, opts);
    if (r != ASB_OK) {
        asb_client_free(c);
        return r;
    }
    *out = c;
    return ASB_OK;
}

ASB_PUBLIC void asb_client_free(asb_client *c)
{
    if (!c)
        return;
    if (c->curl) /* only set once libcurl is loaded */
        curl_easy_cleanup(c->curl);
    free(c->server);
    free(c->field_validation);
    free(c->noproxy);
    free(c->state_dir);
    if (c->token) {
        explicit_bzero(c->token, strlen(c->token));
        free(c->token);
    }
    free(c);
}

ASB_PUBLIC const char *asb_client_server(const asb_client *c)
{
    return c ? c->server : NULL;
}

char *asbi_path(asb_client *c, const asb_kind *k, const char *ns, const char *name, const char *sub)
{
    char *ens = ns ? asbi_url_escape(ns) : NULL, *ename = name ? asbi_url_escape(name) : NULL;
    char *p = NULL;
    if ((ns && !ens) || (name && !ename) ||
        asprintf(&p, "%s/apis/%s/%s%s%s/%s%s%s%s%s", c->server, k->group, k->version,
                 ens ? "/namespaces/" : "", ens ? ens : "", k->plural, ename ? "/" : "",
                 ename ? ename : "", sub ? "/" : "", sub ? sub : "") < 0) {
        p = NULL;
        asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    free(ens);
    free(ename);
    return p;
}

void asbi_headers_free(char *lines[ASBI_MAX_HEADERS], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        explicit_bzero(lines[i], strlen(lines[i])); /* the token */
        free(lines[i]);
    }
}

int asbi_headers(const asb_client *c, const char *content_type, char *lines[ASBI_MAX_HEADERS],
                 size_t *ret_n)
{
    size_t n = 0;
    bool ok = (lines[n++] = strdup("Accept: application/json")) != NULL;
    if (ok && c->token)
        ok = (lines[n++] = strdup_printf("Authorization: Bearer %s", c->token)) != NULL;
    if (ok && content_type)
        ok = (lines[n++] = strdup_printf("Content-Type: %s", content_type)) != NULL;
    if (!ok) {
        asbi_headers_free(lines, n - 1);
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    }
    *ret_n = n;
    return ASB_OK;
}

typedef struct reply {
    buf body;
    int oom; /* why the write stopped: 1 out of memory, 2 over MAX_REPLY */
} reply;

static bool reply_body(const char *data, size_t len, long status, void *payload)
{
    reply *r = payload;
    if (r->body.len + len + 1 > MAX_REPLY) {
        r->oom = 2;
        return false;
    }
    if (buf_append(&r->body, data, len) < 0) {
        r->oom = 1;
        return false;
    }
    return true;
}

/* The text of a `Warning` header value, `299 - "text"` (RFC 7234: code, agent, quoted-string,
 * optional date), unquoted; a value of another shape is taken whole. Owned, NULL on ENOMEM. */
static char *warning_text(const char *v, size_t n)
{
    const char *end = v + n, *p = v;
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    bool shaped = p > v && p < end && *p == ' ';
    if (shaped) {
        p++;
        while (p < end && *p != ' ')
            p++; /* agent */
        shaped = p + 1 < end && p[1] == '"';
        p += 2;
    }
    char *t = malloc(n + 1), *o = t;
    if (!t)
        return NULL;
    if (!shaped) {
        memcpy(t, v, n);
        t[n] = '\0';
        return t;
    }
    for (; p < end && *p != '"'; p++) {
        if (*p == '\\' && p + 1 < end)
            p++;
        *o++ = *p;
    }
    *o = '\0';
    return t;
}

typedef struct reply_state {
    reply rep;
    char **warn; /* texts of the reply's Warning headers */
    size_t n_warn;
    char *claim_sandbox; /* the Asb-Claim-Sandbox header (shared/claim-header.h), or NULL */
} reply_state;

static void reply_header(const char *name, size_t name_len, const char *v, size_t vn,
                         void *payload)
{
    reply_state *st = payload;
    if (name_len == strlen(CLAIM_HEADER_SANDBOX) &&
        strncasecmp(name, CLAIM_HEADER_SANDBOX, name_len) == 0) {
        free(st->claim_sandbox);
        st->claim_sandbox = strndup(v, vn);
        return;
    }
    if (name_len != strlen("Warning") || strncasecmp(name, "Warning", name_len) != 0 ||
        st->n_warn >= 64)
        return;
    char **nv = realloc(st->warn, (st->n_warn + 1) * sizeof(*nv));
    if (!nv)
        return;
    st->warn = nv;
    if ((st->warn[st->n_warn] = warning_text(v, vn)))
        st->n_warn++;
}

static bool reply_state_body(const char *data, size_t len, long status, void *payload)
{
    return reply_body(data, len, status, &((reply_state *)payload)->rep);
}

/* Hands the reply's warnings to the warning callback (or the log) and frees them. */
static void report_warnings(asb_client *c, reply_state *st)
{
    for (size_t i = 0; i < st->n_warn; i++) {
        if (c->warning_cb)
            c->warning_cb(st->warn[i], c->warning_payload);
        else
            asbi_log(c, ASB_LOG_WARNING, "%s", st->warn[i]);
        free(st->warn[i]);
    }
    free(st->warn);
    st->warn = NULL;
    st->n_warn = 0;
}

/* One request. On 2xx *out gets the body (owned); otherwise the error comes from the Status.
 * Warning headers of the reply, whatever its status, go to report_warnings(); its
 * Asb-Claim-Sandbox header goes to *ret_claim_sandbox (owned, NULL when there was none) when
 * asked for. */
static int request_ex(asb_client *c, const char *method, const char *url, const char *content_type,
                      const char *body, char **out, char **ret_claim_sandbox)
{
    char *lines[ASBI_MAX_HEADERS];
    size_t n_lines = 0;
    int r = asbi_headers(c, content_type, lines, &n_lines);
    if (r != ASB_OK)
        return r;
    reply_state st = {0};
    asbi_http_exchange x = {
        .method = method,
        .url = url,
        .headers = (const char *const *)lines,
        .n_headers = n_lines,
        .body = body,
        .body_len = body ? strlen(body) : 0,
        .timeout_ms = c->timeout_ms,
        .connect_timeout_ms = c->connect_timeout_ms,
        .on_header = reply_header,
        .on_body = reply_state_body,
        .payload = &st,
    };
    long status = 0;
    r = asbi_http_perform(c, &x, &status);
    asbi_headers_free(lines, n_lines);
    asbi_log(c, ASB_LOG_DEBUG, "%s %s -> %ld", method, url, status);
    report_warnings(c, &st);
    if (ret_claim_sandbox && r == ASB_OK && status >= 200 && status <= 299)
        *ret_claim_sandbox = TAKE_PTR(st.claim_sandbox);
    free(st.claim_sandbox);
    reply rep = st.rep;
    if (r == ASBI_HTTP_STOPPED) {
        buf_done(&rep.body);
        return rep.oom == 1 ? asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory")
                            : asbi_error_set(ASB_EPROTOCOL, (int)status, NULL,
                                             "reply from %s is too large", url);
    }
    if (r != ASB_OK) {
        buf_done(&rep.body);
        return r;
    }
    if (status < 200 || status > 299) {
        r = asbi_error_from_reply((int)status, rep.body.data, rep.body.len);
        buf_done(&rep.body);
        return r;
    }
    /* Every verb answers a JSON object (the object, a List or a Status). */
    json_t *j = rep.body.data ? json_loadb(rep.body.data, rep.body.len, 0, NULL) : NULL;
    int is_obj = json_is_object(j);
    json_decref(j);
    if (!is_obj) {
        buf_done(&rep.body);
        return asbi_error_set(ASB_EPROTOCOL, (int)status, NULL,
                              "%s %s: the reply is not a JSON object", method, url);
    }
    if (out)
        *out = TAKE_PTR(rep.body.data);
    buf_done(&rep.body);
    return ASB_OK;
}

static int request(asb_client *c, const char *method, const char *url, const char *content_type,
                   const char *body, char **out)
{
    return request_ex(c, method, url, content_type, body, out, NULL);
}

static int resolve(const asb_kind **k, asb_client *c, const char *kind, const char *name,
                   int need_name)
{
    if (!c || !kind)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "NULL client or kind");
    if (need_name && (!name || !*name))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "resource name may not be empty");
    return asb_kind_lookup(k, kind);
}

static int object_call_ex(char **out, asb_client *c, const char *kind, const char *ns,
                          const char *name, const char *sub, const char *method,
                          const char *content_type, const char *body, char **ret_claim_sandbox)
{
    const asb_kind *k;
    int r = resolve(&k, c, kind, name, name != NULL || strcmp(method, "POST") != 0);
    if (r != ASB_OK)
        return r;
    char *url = asbi_path(c, k, ns ? ns : "default", name, sub);
    if (!url)
        return ASB_ENOMEM;
    bool writes =
        strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0;
    if (writes && (c->field_validation || c->dry_run)) {
        char *u = NULL;
        if (asprintf(&u, "%s?%s%s%s%s", url, c->field_validation ? "fieldValidation=" : "",
                     c->field_validation ? c->field_validation : "",
                     c->field_validation && c->dry_run ? "&" : "",
                     c->dry_run ? "dryRun=All" : "") < 0) {
            free(url);
            return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
        }
        free(url);
        url = u;
    }
    r = request_ex(c, method, url, content_type, body, out, ret_claim_sandbox);
    free(url);
    return r;
}

static int object_call(char **out, asb_client *c, const char *kind, const char *ns,
                       const char *name, const char *sub, const char *method,
                       const char *content_type, const char *body)
{
    return object_call_ex(out, c, kind, ns, name, sub, method, content_type, body, NULL);
}

ASB_PUBLIC int asb_server_version(char **out, asb_client *c)
{
    if (!out || !c)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_server_version: NULL argument");
    char *url = NULL;
    if (asprintf(&url, "%s/version", c->server) < 0)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    int r = request(c, "GET", url, NULL, NULL, out);
    free(url);
    return r;
}

ASB_PUBLIC int asb_sandbox_usage(char **out, asb_client *c, const char *ns, const char *name)
{
    if (!out || !c)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_sandbox_usage: NULL argument");
    char *url = NULL;
    int k =
        !ns    ? asprintf(&url, "%s/apis/metrics.k8s.io/v1beta1/pods", c->server)
        : name ? asprintf(&url, "%s/apis/metrics.k8s.io/v1beta1/namespaces/%s/pods/%s", c->server,
                          ns, name)
               : asprintf(&url, "%s/apis/metrics.k8s.io/v1beta1/namespaces/%s/pods", c->server, ns);
    if (k < 0)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    int r = request(c, "GET", url, NULL, NULL, out);
    free(url);
    return r;
}

ASB_PUBLIC int asb_object_get(char **out, asb_client *c, const char *kind, const char *ns,
                              const char *name)
{
    return object_call(out, c, kind, ns, name ? name : "", NULL, "GET", NULL, NULL);
}

int asbi_object_get_json(json_t **ret, asb_client *c, const char *kind, const char *ns,
                         const char *name)
{
    char *text = NULL;
    int r = asb_object_get(&text, c, kind, ns, name);
    if (r != ASB_OK)
        return r;
    json_t *obj = json_loads(text, 0, NULL);
    asb_free(text);
    if (!obj)
        return asbi_error_set(ASB_EPROTOCOL, 0, NULL, "%s %s: the reply is not JSON", kind, name);
    *ret = obj;
    return ASB_OK;
}

ASB_PUBLIC int asb_object_list(char **out, asb_client *c, const char *kind, const char *ns,
                               const asb_list_options *opts)
{
    const asb_kind *k;
    int r = resolve(&k, c, kind, NULL, 0);
    if (r != ASB_OK)
        return r;
    if (opts && (opts->version == 0 || opts->version > ASB_LIST_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_list_options: unknown version");
    int all = opts && opts->all_namespaces;
    char *url = asbi_path(c, k, all ? NULL : ns ? ns : "default", NULL, NULL);
    if (!url)
        return ASB_ENOMEM;
    const char *ls = opts ? opts->label_selector : NULL, *fs = opts ? opts->field_selector : NULL;
    if (ls && *ls)
        r = asbi_url_add_query(&url, "labelSelector", ls);
    if (r == ASB_OK && fs && *fs)
        r = asbi_url_add_query(&url, "fieldSelector", fs);
    if (r == ASB_OK)
        r = request(c, "GET", url, NULL, NULL, out);
    free(url);
    return r;
}

/* The name in an object's metadata, or NULL when the JSON is not an object (error set). */
static int object_name(const char *json, char **ret_name)
{
    json_error_t err;
    json_t *o = json ? json_loads(json, 0, &err) : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        return asbi_error_set(ASB_EINVAL, 0, NULL, "object: not a JSON object");
    }
    const char *n = json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
    *ret_name = n ? strdup(n) : NULL;
    json_decref(o);
    if (n && !*ret_name)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    return ASB_OK;
}

ASB_PUBLIC int asb_object_create(char **out, asb_client *c, const char *kind, const char *ns,
                                 const char *object_json)
{
    char *name = NULL;
    int r = object_name(object_json, &name);
    free(name);
    if (r != ASB_OK)
        return r;
    return object_call(out, c, kind, ns, NULL, NULL, "POST", "application/json", object_json);
}

int asbi_object_create_claim(char **out, char **ret_claim_sandbox, asb_client *c, const char *ns,
                             const char *object_json)
{
    *ret_claim_sandbox = NULL;
    return object_call_ex(out, c, "SandboxClaim", ns, NULL, NULL, "POST", "application/json",
                          object_json, ret_claim_sandbox);
}

ASB_PUBLIC int asb_object_update(char **out, asb_client *c, const char *kind, const char *ns,
                                 const char *object_json)
{
    char *name = NULL;
    int r = object_name(object_json, &name);
    if (r != ASB_OK)
        return r;
    if (!name) {
        return asbi_error_set(ASB_EINVAL, 0, NULL, "object has no metadata.name");
    }
    r = object_call(out, c, kind, ns, name, NULL, "PUT", "application/json", object_json);
    free(name);
    return r;
}

ASB_PUBLIC int asb_object_patch(char **out, asb_client *c, const char *kind, const char *ns,
                                const char *name, const char *merge_patch_json, int status)
{
    if (!merge_patch_json)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "NULL patch");
    return object_call(out, c, kind, ns, name ? name : "", status ? "status" : NULL, "PATCH",
                       "application/merge-patch+json", merge_patch_json);
}

ASB_PUBLIC int asb_object_patch_typed(char **out, asb_client *c, const char *kind, const char *ns,
                                      const char *name, const char *patch,
                                      const asb_patch_options *opts)
{
    static const char *const types[] = {[ASB_PATCH_MERGE] = "application/merge-patch+json",
                                        [ASB_PATCH_JSON] = "application/json-patch+json",
                                        [ASB_PATCH_STRATEGIC] =
                                            "application/strategic-merge-patch+json"};
    if (!patch)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "NULL patch");
    if (opts && (opts->version == 0 || opts->version > ASB_PATCH_OPTIONS_VERSION))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_patch_options: unknown version");
    int type = opts ? opts->type : ASB_PATCH_MERGE;
    if (type < 0 || type >= (int)(sizeof(types) / sizeof(types[0])))
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_patch_options: unknown patch type %d",
                              type);
    return object_call(out, c, kind, ns, name ? name : "", opts ? opts->subresource : NULL, "PATCH",
                       types[type], patch);
}

ASB_PUBLIC int asb_server_discovery(char **out, asb_client *c, const char *group_version)
{
    if (!out || !c)
        return asbi_error_set(ASB_EINVAL, 0, NULL, "asb_server_discovery: NULL argument");
    char *url = NULL;
    if (asprintf(&url, "%s/apis%s%s", c->server, group_version ? "/" : "",
                 group_version ? group_version : "") < 0)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    int r = request(c, "GET", url, NULL, NULL, out);
    free(url);
    return r;
}

ASB_PUBLIC int asb_object_delete(char **out, asb_client *c, const char *kind, const char *ns,
                                 const char *name)
{
    return object_call(out, c, kind, ns, name ? name : "", NULL, "DELETE", NULL, NULL);
}
