/* Kubernetes API client: kubeconfig (libyaml through libasb's manifest parser) and in-cluster
 * configuration, requests and line-delimited watch streams on libcurl. TLS verification is on
 * unless the kubeconfig says insecure-skip-tls-verify. */
#include "kube/kube.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asb/errors.h"
#include "asb/manifest.h"
#include "api/api.h"
#include "basic/buf.h"
#include "basic/macro.h"

const kube_res_info kube_resources[_KR_MAX] = {
    [KR_SANDBOX] = {"/apis/agents.x-k8s.io/v1beta1", "sandboxes", "Sandbox",
                    "agents.x-k8s.io/v1beta1"},
    [KR_TEMPLATE] = {"/apis/extensions.agents.x-k8s.io/v1beta1", "sandboxtemplates",
                     "SandboxTemplate", "extensions.agents.x-k8s.io/v1beta1"},
    [KR_POOL] = {"/apis/extensions.agents.x-k8s.io/v1beta1", "sandboxwarmpools", "SandboxWarmPool",
                 "extensions.agents.x-k8s.io/v1beta1"},
    [KR_CLAIM] = {"/apis/extensions.agents.x-k8s.io/v1beta1", "sandboxclaims", "SandboxClaim",
                  "extensions.agents.x-k8s.io/v1beta1"},
    [KR_POD] = {"/api/v1", "pods", "Pod", "v1"},
    [KR_SERVICE] = {"/api/v1", "services", "Service", "v1"},
    [KR_PVC] = {"/api/v1", "persistentvolumeclaims", "PersistentVolumeClaim", "v1"},
    [KR_NETPOL] = {"/apis/networking.k8s.io/v1", "networkpolicies", "NetworkPolicy",
                   "networking.k8s.io/v1"},
    [KR_LEASE] = {"/apis/coordination.k8s.io/v1", "leases", "Lease", "coordination.k8s.io/v1"},
    [KR_EVENT] = {"/api/v1", "events", "Event", "v1"},
    [KR_SNAPSHOT] = {"/apis/extensions.agents.x-k8s.io/v1beta1", "sandboxsnapshots",
                     "SandboxSnapshot", "extensions.agents.x-k8s.io/v1beta1"},
    [KR_VOLSNAP] = {"/apis/snapshot.storage.k8s.io/v1", "volumesnapshots", "VolumeSnapshot",
                    "snapshot.storage.k8s.io/v1"},
};

char *kube_path(kube_res r, const char *ns, const char *name, const char *sub, const char *query)
{
    char *p = NULL;
    const kube_res_info *i = &kube_resources[r];
    if (asprintf(&p, "%s%s%s/%s%s%s%s%s%s%s", i->prefix, ns ? "/namespaces/" : "", ns ? ns : "",
                 i->plural, name ? "/" : "", name ? name : "", sub ? "/" : "", sub ? sub : "",
                 query ? "?" : "", query ? query : "") < 0)
        return NULL;
    return p;
}

/* The file's text (owned by the caller; what could be read should a read fail), NULL when it
 * cannot be opened or on ENOMEM. */
static char *read_file(const char *path)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    _cleanup_buf_ buf text = BUF_INIT;
    if (buf_append_fd(&text, fd) == -ENOMEM)
        return NULL;
    return buf_steal(&text, NULL);
}

static void set_error(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static void set_error(char **ret_error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (ret_error && vasprintf(ret_error, fmt, ap) < 0)
        *ret_error = NULL;
    va_end(ap);
}

kube_client *kube_client_free(kube_client *c)
{
    if (!c)
        return NULL;
    free(c->server);
    free(c->token);
    free(c->token_file);
    free(c->ca_file);
    free(c->ca_pem);
    free(c->cert_file);
    free(c->key_file);
    free(c->cert_pem);
    free(c->key_pem);
    free(c->namespace);
    free(c->user_agent);
    free(c);
    return NULL;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* base64 (standard alphabet, padding optional) -> owned NUL-terminated buffer. */
static char *b64_decode(const char *in)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(in);
    char *out = malloc(n / 4 * 3 + 4);
    if (!out)
        return NULL;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = in[i] ? strchr(tbl, in[i]) : NULL;
        if (in[i] == '=' || in[i] == '\n' || in[i] == '\r' || in[i] == ' ')
            continue;
        if (!p) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)(p - tbl);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = 0;
    return out;
}

static const json_t *named(const json_t *list, const char *name, const char *field)
{
    size_t i;
    const json_t *e;
    json_array_foreach (list, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && name && strcmp(n, name) == 0)
            return json_object_get(e, field);
    }
    return NULL;
}

static int from_kubeconfig(const char *path, const char *context, kube_client **ret,
                           char **ret_error)
{
    _cleanup_free_ char *text = read_file(path);
    if (!text) {
        set_error(ret_error, "cannot read kubeconfig %s: %m", path);
        return -errno;
    }
    return kube_client_from_kubeconfig_text(text, strlen(text), path, context, ret, ret_error);
}

int kube_client_from_kubeconfig_text(const char *text, size_t len, const char *path,
                                     const char *context, kube_client **ret, char **ret_error)
{
    char *jtext = NULL;
    if (asb_manifest_parse(&jtext, text, len) != 0) {
        const asb_error *e = asb_error_last();
        set_error(ret_error, "cannot parse kubeconfig %s: %s", path,
                  e && e->message ? e->message : "unknown error");
        return -EINVAL;
    }
    json_t *docs = json_loads(jtext, 0, NULL);
    free(jtext);
    _cleanup_json_ json_t *cfg = json_incref(json_array_get(docs, 0));
    json_decref(docs);
    if (!json_is_object(cfg)) {
        set_error(ret_error, "kubeconfig %s: not a mapping", path);
        return -EINVAL;
    }
    const char *ctxname =
        context ? context : json_string_value(json_object_get(cfg, "current-context"));
    const json_t *ctx = named(json_object_get(cfg, "contexts"), ctxname, "context");
    if (!ctx) {
        set_error(ret_error, "kubeconfig %s: context \"%s\" not found", path,
                  ctxname ? ctxname : "");
        return -ENOENT;
    }
    const char *cluster_name = json_string_value(json_object_get(ctx, "cluster"));
    const char *user_name = json_string_value(json_object_get(ctx, "user"));
    const json_t *cluster = named(json_object_get(cfg, "clusters"), cluster_name, "cluster");
    const json_t *user = named(json_object_get(cfg, "users"), user_name, "user");
    const char *server = json_string_value(json_object_get(cluster, "server"));
    if (!server) {
        set_error(ret_error, "kubeconfig %s: cluster \"%s\" has no server", path,
                  cluster_name ? cluster_name : "");
        return -EINVAL;
    }
    if (user && json_object_get(user, "exec")) {
        set_error(ret_error,
                  "kubeconfig %s: user \"%s\" uses exec credentials, which "
                  "asb-controller does not run; use a token or a client certificate",
                  path, user_name);
        return -EOPNOTSUPP;
    }
    kube_client *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->server = strdup(server);
    size_t l = strlen(c->server);
    while (l > 0 && c->server[l - 1] == '/')
        c->server[--l] = 0;
    c->insecure = json_is_true(json_object_get(cluster, "insecure-skip-tls-verify"));
    c->ca_file = dup_or_null(json_string_value(json_object_get(cluster, "certificate-authority")));
    const char *d = json_string_value(json_object_get(cluster, "certificate-authority-data"));
    if (d)
        c->ca_pem = b64_decode(d);
    c->token = dup_or_null(json_string_value(json_object_get(user, "token")));
    c->token_file = dup_or_null(json_string_value(json_object_get(user, "tokenFile")));
    c->cert_file = dup_or_null(json_string_value(json_object_get(user, "client-certificate")));
    c->key_file = dup_or_null(json_string_value(json_object_get(user, "client-key")));
    if ((d = json_string_value(json_object_get(user, "client-certificate-data"))))
        c->cert_pem = b64_decode(d);
    if ((d = json_string_value(json_object_get(user, "client-key-data"))))
        c->key_pem = b64_decode(d);
    const char *ns = json_string_value(json_object_get(ctx, "namespace"));
    c->namespace = strdup(ns && *ns ? ns : "default");
    *ret = c;
    return 0;
}

int kube_client_in_cluster(const char *sa_dir, kube_client **ret, char **ret_error)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
        set_error(ret_error, "not in a cluster: KUBERNETES_SERVICE_HOST/PORT unset");
        return -ENOENT;
    }
    kube_client *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    bool v6 = strchr(host, ':') != NULL;
    if (asprintf(&c->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0 ||
        asprintf(&c->token_file, "%s/token", sa_dir) < 0 ||
        asprintf(&c->ca_file, "%s/ca.crt", sa_dir) < 0) {
        kube_client_free(c);
        return -ENOMEM;
    }
    _cleanup_free_ char *nsfile = NULL;
    if (asprintf(&nsfile, "%s/namespace", sa_dir) < 0) {
        kube_client_free(c);
        return -ENOMEM;
    }
    char *ns = read_file(nsfile);
    if (ns)
        ns[strcspn(ns, "\n")] = 0;
    c->namespace = ns && *ns ? ns : strdup("default");
    if (ns && !*ns)
        free(ns);
    *ret = c;
    return 0;
}

int kube_client_load(const char *kubeconfig, const char *context, kube_client **ret,
                     char **ret_error)
{
    if (!kubeconfig || !*kubeconfig) {
        const char *env = getenv("KUBECONFIG");
        if (env && *env) {
            /* First entry of a colon-separated list. */
            _cleanup_free_ char *first = strndup(env, strcspn(env, ":"));
            return first ? from_kubeconfig(first, context, ret, ret_error) : -ENOMEM;
        }
        if (getenv("KUBERNETES_SERVICE_HOST")) {
            const char *sa = getenv("ASB_SERVICEACCOUNT_DIR"); /* tests */
            return kube_client_in_cluster(
                sa && *sa ? sa : "/var/run/secrets/kubernetes.io/serviceaccount", ret, ret_error);
        }
        const char *home = getenv("HOME");
        _cleanup_free_ char *p = NULL;
        if (!home || asprintf(&p, "%s/.kube/config", home) < 0) {
            set_error(ret_error, "no kubeconfig and not in a cluster");
            return -ENOENT;
        }
        return from_kubeconfig(p, context, ret, ret_error);
    }
    return from_kubeconfig(kubeconfig, context, ret, ret_error);
}

/* ---- requests ---- */
/* curl write callback: appends to the buf at ud (a short count fails the transfer on ENOMEM). */
static size_t collect(char *ptr, size_t size, size_t n, void *ud)
{
    return buf_append(ud, ptr, size * n) < 0 ? 0 : size * n;
}

/* One easy handle per thread for plain requests: curl_easy_reset keeps its connection cache, so
 * a worker reuses its keep-alive connection to the API server instead of connecting (and
 * handshaking TLS) per request. */
static pthread_key_t handle_key;
static pthread_once_t handle_once = PTHREAD_ONCE_INIT;

static void handle_free(void *h)
{
    curl_easy_cleanup(h);
}

static void handle_key_init(void)
{
    pthread_key_create(&handle_key, handle_free);
}

static CURL *thread_handle(void)
{
    pthread_once(&handle_once, handle_key_init);
    CURL *h = pthread_getspecific(handle_key);
    if (h) {
        curl_easy_reset(h);
        return h;
    }
    h = curl_easy_init();
    if (h)
        pthread_setspecific(handle_key, h);
    return h;
}

static CURL *easy_new(kube_client *c, const char *path, struct curl_slist **hdrs, char **tokbuf,
                      bool reuse)
{
    CURL *h = reuse ? thread_handle() : curl_easy_init();
    if (!h)
        return NULL;
    _cleanup_free_ char *url = NULL;
    if (asprintf(&url, "%s%s", c->server, path) < 0) {
        if (!reuse)
            curl_easy_cleanup(h);
        return NULL;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent ? c->user_agent : "asb-controller");
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, c->insecure ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, c->insecure ? 0L : 2L);
    if (c->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (c->ca_pem) {
        struct curl_blob b = {c->ca_pem, strlen(c->ca_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    }
    if (c->cert_file)
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
    if (c->key_file)
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
    if (c->cert_pem) {
        struct curl_blob b = {c->cert_pem, strlen(c->cert_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
    }
    if (c->key_pem) {
        struct curl_blob b = {c->key_pem, strlen(c->key_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
    }
    const char *token = c->token;
    if (c->token_file) {
        *tokbuf = read_file(c->token_file);
        if (*tokbuf) {
            (*tokbuf)[strcspn(*tokbuf, "\r\n")] = 0;
            token = *tokbuf;
        }
    }
    *hdrs = curl_slist_append(*hdrs, "Accept: application/json");
    if (token) {
        _cleanup_free_ char *auth = NULL;
        if (asprintf(&auth, "Authorization: Bearer %s", token) >= 0)
            *hdrs = curl_slist_append(*hdrs, auth);
    }
    return h;
}

int kube_request(kube_client *c, const char *method, const char *path, const char *ctype,
                 const json_t *body, long *ret_status, json_t **ret_body)
{
    struct curl_slist *hdrs = NULL;
    _cleanup_free_ char *tok = NULL;
    _cleanup_free_ char *payload = NULL;
    _cleanup_buf_ buf out = BUF_INIT;
    CURL *h = easy_new(c, path, &hdrs, &tok, true);
    if (!h)
        return -ENOMEM;
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
    if (body) {
        payload = json_dumps(body, JSON_COMPACT);
        if (!payload) {
            curl_slist_free_all(hdrs);
            return -ENOMEM;
        }
        _cleanup_free_ char *ct = NULL;
        if (asprintf(&ct, "Content-Type: %s", ctype ? ctype : "application/json") >= 0)
            hdrs = curl_slist_append(hdrs, ct);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    /* The handle stays with the thread; drop references to this call's buffers. */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK)
        return rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -ECONNREFUSED;
    if (ret_status)
        *ret_status = status;
    if (ret_body)
        *ret_body = out.data ? json_loadb(out.data, out.len, 0, NULL) : NULL;
    return 0;
}

int kube_call(kube_client *c, const char *method, const char *path, const char *ctype,
              const json_t *body, json_t **ret_body)
{
    long status = 0;
    json_t *ans = NULL;
    int r = kube_request(c, method, path, ctype, body, &status, &ans);
    if (r < 0)
        return r;
    if (status >= 200 && status < 300) {
        if (ret_body)
            *ret_body = ans;
        else
            json_decref(ans);
        return 0;
    }
    const char *reason = json_string_value(json_object_get(ans, "reason"));
    int err = status == 404   ? -ENOENT
              : status == 409 ? (reason && strcmp(reason, "AlreadyExists") == 0 ? -EEXIST : -ESTALE)
              : status == 410 ? -EIDRM
              : (status == 422 || status == 400) ? -EINVAL
              : (status == 401 || status == 403) ? -EACCES
                                                 : -EIO;
    if (ret_body)
        *ret_body = ans;
    else
        json_decref(ans);
    return err;
}

typedef struct streamer {
    buf pending; /* bytes after the last complete line */
    kube_line_fn fn;
    void *payload;
    atomic_bool *stop;
    bool aborted;
} streamer;

static size_t stream_write(char *ptr, size_t size, size_t n, void *ud)
{
    streamer *s = ud;
    size_t add = size * n;
    if (collect(ptr, 1, add, &s->pending) != add)
        return 0;
    char *start = s->pending.data;
    char *nl;
    while ((nl = memchr(start, '\n', s->pending.len - (size_t)(start - s->pending.data)))) {
        *nl = 0;
        if (nl > start && s->fn(start, (size_t)(nl - start), s->payload) < 0) {
            s->aborted = true;
            return 0;
        }
        start = nl + 1;
    }
    buf_consume(&s->pending, (size_t)(start - s->pending.data));
    return add;
}

static int stream_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d)
{
    streamer *s = ud;
    return s->stop && atomic_load(s->stop) ? 1 : 0;
}

int kube_stream(kube_client *c, const char *path, kube_line_fn fn, void *payload, atomic_bool *stop,
                long *ret_status)
{
    struct curl_slist *hdrs = NULL;
    _cleanup_free_ char *tok = NULL;
    streamer s = {.fn = fn, .payload = payload, .stop = stop};
    CURL *h = easy_new(c, path, &hdrs, &tok, false);
    if (!h)
        return -ENOMEM;
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, stream_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &s);
    /* A silent connection (no bookmarks, no events) for this long is presumed dead. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 600L);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    if (s.pending.len > 0 && rc == CURLE_OK && !s.aborted)
        fn(s.pending.data, s.pending.len, payload);
    buf_done(&s.pending);
    if (ret_status)
        *ret_status = status;
    if (s.aborted)
        return -ECANCELED;
    if (rc == CURLE_ABORTED_BY_CALLBACK)
        return -ECANCELED;
    return rc == CURLE_OK ? 0 : -ECONNRESET;
}
