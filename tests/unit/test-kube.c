/* asb-controller internals without a server: the work queue's client-go semantics (dedupe,
 * per-key serialisation, delayed adds), API paths, kubeconfig loading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"
#include "unit.h"

TEST(queue_dedupes_and_serialises_keys)
{
    kube_queue *q = kube_queue_new("t");
    kube_queue_add(q, "ns/a");
    kube_queue_add(q, "ns/a");
    kube_queue_add(q, "ns/b");
    CHECK_INT_EQ(kube_queue_len(q), 2);
    char *k1 = kube_queue_get(q);
    CHECK_STR_EQ(k1, "ns/a");
    /* ns/a is processing: an add marks it dirty, it is not handed out again until done. */
    kube_queue_add(q, "ns/a");
    char *k2 = kube_queue_get(q);
    CHECK_STR_EQ(k2, "ns/b");
    CHECK_INT_EQ(kube_queue_len(q), 0);
    kube_queue_done(q, k1);
    CHECK_INT_EQ(kube_queue_len(q), 1);
    char *k3 = kube_queue_get(q);
    CHECK_STR_EQ(k3, "ns/a");
    kube_queue_done(q, k2);
    kube_queue_done(q, k3);
    free(k1);
    free(k2);
    free(k3);
    kube_queue_free(q);
}

TEST(queue_delayed_and_rate_limited)
{
    kube_queue *q = kube_queue_new("t");
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    kube_queue_add_after(q, "ns/late", 50000);
    kube_queue_add_after(q, "ns/late", 200000); /* the earlier deadline wins */
    char *k = kube_queue_get(q);
    clock_gettime(CLOCK_MONOTONIC, &b);
    long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    CHECK_STR_EQ(k, "ns/late");
    CHECK(ms >= 45 && ms < 190);
    kube_queue_done(q, k);
    free(k);
    /* Backoff grows per failure and forget resets it. */
    for (int i = 0; i < 4; i++) {
        kube_queue_add_rate_limited(q, "ns/x");
        k = kube_queue_get(q);
        kube_queue_done(q, k);
        free(k);
    }
    clock_gettime(CLOCK_MONOTONIC, &a);
    kube_queue_add_rate_limited(q, "ns/x"); /* 5 ms << 4 = 80 ms */
    k = kube_queue_get(q);
    clock_gettime(CLOCK_MONOTONIC, &b);
    ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    CHECK(ms >= 70);
    kube_queue_done(q, k);
    free(k);
    kube_queue_forget(q, "ns/x");
    clock_gettime(CLOCK_MONOTONIC, &a);
    kube_queue_add_rate_limited(q, "ns/x");
    k = kube_queue_get(q);
    clock_gettime(CLOCK_MONOTONIC, &b);
    ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    CHECK(ms < 60);
    kube_queue_done(q, k);
    free(k);
    kube_queue_shutdown(q);
    CHECK(kube_queue_get(q) == NULL);
    kube_queue_free(q);
}

TEST(paths)
{
    char *p = kube_path(KR_SANDBOX, "ns", "s", "status", NULL);
    CHECK_STR_EQ(p, "/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/s/status");
    free(p);
    p = kube_path(KR_POD, NULL, NULL, NULL, "watch=true");
    CHECK_STR_EQ(p, "/api/v1/pods?watch=true");
    free(p);
    p = kube_path(KR_POOL, "d", NULL, NULL, NULL);
    CHECK_STR_EQ(p, "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/d/sandboxwarmpools");
    free(p);
    CHECK(kube_is_system_key("agents.x-k8s.io/x"));
    CHECK(kube_is_system_key("extensions.agents.x-k8s.io/x"));
    CHECK(kube_is_system_key("opentelemetry.io/trace-context"));
    CHECK(!kube_is_system_key("sandbox.users.io/x"));
}

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/test-kube-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    if (write(fd, text, strlen(text)) < 0)
        path[0] = 0;
    close(fd);
    return path;
}

TEST(kubeconfig_contexts_and_inline_data)
{
    /* "aGVsbG8=" is base64 of "hello". */
    const char *cfg = "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
                      "clusters:\n- name: ca\n  cluster:\n    server: https://a.example:6443/\n"
                      "    certificate-authority-data: aGVsbG8=\n"
                      "- name: cb\n  cluster:\n    server: http://127.0.0.1:1\n"
                      "    insecure-skip-tls-verify: true\n"
                      "users:\n- name: ua\n  user:\n    token: tok\n"
                      "- name: ub\n  user:\n    client-certificate-data: aGVsbG8=\n"
                      "    client-key: /k.pem\n"
                      "contexts:\n- name: a\n  context: {cluster: ca, user: ua, namespace: team}\n"
                      "- name: b\n  context: {cluster: cb, user: ub}\n";
    char *path = write_tmp(cfg);
    kube_client *c = NULL;
    api_error err = API_ERROR_INIT;
    CHECK_INT_EQ(kube_client_load(path, NULL, &c, &err), 0);
    if (c) {
        CHECK_STR_EQ(c->server, "https://a.example:6443");
        CHECK_STR_EQ(c->token, "tok");
        CHECK_STR_EQ(c->ca_pem, "hello");
        CHECK_STR_EQ(c->namespace, "team");
        CHECK(!c->insecure);
        kube_client_free(c);
    }
    c = NULL;
    CHECK_INT_EQ(kube_client_load(path, "b", &c, &err), 0);
    if (c) {
        CHECK(c->insecure);
        CHECK_STR_EQ(c->cert_pem, "hello");
        CHECK_STR_EQ(c->key_file, "/k.pem");
        CHECK(c->token == NULL);
        CHECK_STR_EQ(c->namespace, "default");
        kube_client_free(c);
    }
    c = NULL;
    CHECK_INT_EQ(kube_client_load(path, "zzz", &c, &err), -ENOENT);
    CHECK(err.message && strstr(err.message, "context \"zzz\" not found"));
    api_error_clear(&err);
    CHECK_INT_EQ(kube_client_load("/nonexistent/kubeconfig", NULL, &c, &err), -ENOENT);
    CHECK_STR_EQ(err.message,
                 "cannot read kubeconfig /nonexistent/kubeconfig: No such file or directory");
    api_error_clear(&err);
    unlink(path);
    free(path);
}
