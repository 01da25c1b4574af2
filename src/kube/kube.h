/* asb-controller internals: a Kubernetes API client on libcurl + jansson, informers (list, then
 * watch from the list's resourceVersion, bookmarks, re-list on 410 Gone), a rate-limited work
 * queue with per-key serialisation, and the reconcilers (docs/kubernetes.md). Internal: every
 * symbol is kube_*. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* ---------------- API client (kube-client.c) ---------------- */
typedef struct kube_client {
    char *server;     /* "https://host:port", no trailing slash */
    char *token;      /* bearer token or NULL */
    char *token_file; /* re-read on every request when set (bound service-account tokens rotate) */
    char *ca_file;    /* PEM file or NULL */
    char *ca_pem;     /* inline PEM (certificate-authority-data) or NULL */
    char *cert_file, *key_file;
    char *cert_pem, *key_pem;
    bool insecure;   /* insecure-skip-tls-verify: true in the kubeconfig */
    char *namespace; /* the context's namespace, "default" if none */
    char *user_agent;
} kube_client;

/* Loads a client configuration: kubeconfig path (NULL: $KUBECONFIG, then in-cluster when
 * KUBERNETES_SERVICE_HOST is set, then ~/.kube/config) and context (NULL: current-context).
 * On failure *ret_error (owned) says why. */
int kube_client_load(const char *kubeconfig, const char *context, kube_client **ret,
                     char **ret_error);
/* The kubeconfig parser on its own (fuzz/fuzz-kubeconfig.c); path only names the file in errors. */
int kube_client_from_kubeconfig_text(const char *text, size_t len, const char *path,
                                     const char *context, kube_client **ret, char **ret_error);
/* In-cluster configuration from the service account directory (tests pass another root). */
int kube_client_in_cluster(const char *sa_dir, kube_client **ret, char **ret_error);
kube_client *kube_client_free(kube_client *c);

/* One request. body may be NULL; ctype NULL means application/json. Returns 0 when an HTTP
 * answer arrived (*ret_status set; *ret_body the parsed JSON answer or NULL) or a negative errno
 * on a transport failure. */
int kube_request(kube_client *c, const char *method, const char *path, const char *ctype,
                 const json_t *body, long *ret_status, json_t **ret_body);
/* kube_request mapped to errno: 2xx -> 0, 404 -> -ENOENT, 409 AlreadyExists -> -EEXIST,
 * 409 Conflict -> -ESTALE, 410 -> -EIDRM, 422/400 -> -EINVAL, 401/403 -> -EACCES, others -EIO. */
int kube_call(kube_client *c, const char *method, const char *path, const char *ctype,
              const json_t *body, json_t **ret_body);

/* Line-delimited streaming GET (watch). fn returns < 0 to stop. *stop is polled. Returns 0 when
 * the server ended the stream, or a negative errno; *ret_status is the HTTP status. */
typedef int (*kube_line_fn)(const char *line, size_t len, void *payload);
int kube_stream(kube_client *c, const char *path, kube_line_fn fn, void *payload, atomic_bool *stop,
                long *ret_status);

/* ---------------- resources ---------------- */
typedef enum kube_res {
    KR_SANDBOX,
    KR_TEMPLATE,
    KR_POOL,
    KR_CLAIM,
    KR_POD,
    KR_SERVICE,
    KR_PVC,
    KR_NETPOL,
    KR_LEASE,
    KR_EVENT,
    KR_SNAPSHOT, /* SandboxSnapshot (--snapshots) */
    KR_VOLSNAP,  /* snapshot.storage.k8s.io/v1 VolumeSnapshot (--snapshots) */
    _KR_MAX,
} kube_res;

typedef struct kube_res_info {
    const char *prefix; /* "/api/v1", "/apis/agents.x-k8s.io/v1beta1" */
    const char *plural;
    const char *kind;
    const char *api_version;
} kube_res_info;
extern const kube_res_info kube_resources[_KR_MAX];

/* Path of a collection (name NULL) or object; ns NULL = all namespaces; sub "status"/NULL.
 * query appended verbatim after '?' when non-NULL. Owned. */
char *kube_path(kube_res r, const char *ns, const char *name, const char *sub, const char *query);

/* ---------------- informers (kube-informer.c) ---------------- */
typedef enum kube_event_type { KUBE_ADDED, KUBE_MODIFIED, KUBE_DELETED } kube_event_type;
/* Called on the informer thread after the cache changed; obj and old borrowed (old NULL on
 * ADDED). */
typedef void (*kube_event_fn)(kube_res r, kube_event_type t, const json_t *obj, const json_t *old,
                              void *payload);

typedef struct kube_informer {
    kube_client *client;
    kube_res res;
    char *label_selector; /* NULL: all */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    json_t *cache; /* "ns/name" -> object (never mutated once stored: replaced) */
    atomic_bool synced;
    atomic_bool *stop;
    kube_event_fn fn;
    void *payload;
    char rv[64];
    atomic_uint relists, watches, events;
} kube_informer;

int kube_informer_start(kube_informer *inf, kube_client *c, kube_res r, const char *selector,
                        kube_event_fn fn, void *payload, atomic_bool *stop);
void kube_informer_join(kube_informer *inf);
/* New reference or NULL. */
json_t *kube_informer_get(kube_informer *inf, const char *ns, const char *name);
/* New array of new references: objects of ns (NULL: all) with label key=value (key NULL: any). */
json_t *kube_informer_list(kube_informer *inf, const char *ns, const char *key, const char *value);
size_t kube_informer_size(kube_informer *inf);

/* ---------------- work queue (kube-queue.c) ---------------- */
typedef struct kube_queue kube_queue;
kube_queue *kube_queue_new(const char *name);
kube_queue *kube_queue_free(kube_queue *q);
void kube_queue_add(kube_queue *q, const char *key);
void kube_queue_add_after(kube_queue *q, const char *key, int64_t usec);
/* Exponential per-key backoff: 5 ms * 2^failures, at most 30 s. */
void kube_queue_add_rate_limited(kube_queue *q, const char *key);
void kube_queue_forget(kube_queue *q, const char *key);
/* Blocks; the returned key (owned) is processing until kube_queue_done. NULL on shutdown. */
char *kube_queue_get(kube_queue *q);
void kube_queue_done(kube_queue *q, const char *key);
void kube_queue_shutdown(kube_queue *q);
size_t kube_queue_len(kube_queue *q);

/* ---------------- controller (kube-controller.c) ---------------- */
typedef struct kube_options {
    const char *cluster_domain;
    bool extensions;
    int sandbox_workers, claim_workers, pool_workers, template_workers;
    int64_t pool_grace_usec;
    size_t pool_max_batch;
    bool warm_pool_eviction;
    int64_t lease_duration_usec, renew_deadline_usec, retry_period_usec;
    bool leader_elect;
    bool claim_events;          /* !--disable-claim-events */
    bool cache_label_selectors; /* cache only Pods/Services/PVCs with the sandbox-name-hash label */
    bool snapshots;             /* SandboxSnapshots as VolumeSnapshots (kube-snapshot.c) */
    const char *leader_election_namespace;
    const char *identity;
} kube_options;

typedef struct kube_metrics {
    atomic_ullong reconciles[5], reconcile_errors[5], conflicts;
    pthread_mutex_t lock;
    json_t *claim_creation; /* label set text -> count (agent_sandbox_claim_creation_total) */
    /* agent_sandbox_creation_latency_ms histogram */
    unsigned long long creation_buckets[16];
    unsigned long long creation_count;
    double creation_sum;
    /* agent_sandbox_claim_controller_startup_latency_ms */
    unsigned long long claim_buckets[16];
    unsigned long long claim_count;
    double claim_sum;
} kube_metrics;

typedef struct kube_ctl {
    kube_client *client;
    kube_options opt;
    atomic_bool stop;
    atomic_bool leading;
    kube_informer inf[_KR_MAX];
    kube_queue *q_sandbox, *q_template, *q_pool, *q_claim, *q_snapshot;
    pthread_t *workers;
    size_t n_workers;
    kube_metrics metrics;
    pthread_mutex_t exp_lock;
    json_t *expectations; /* pool key -> {"create": {name: deadline}, "delete": {uid: deadline}} */
    json_t *seen_ready;   /* sandbox uid -> true once creation latency was recorded */
} kube_ctl;

int kube_ctl_start(kube_ctl *ctl);
/* Sets stop, shuts the queues, joins everything. */
void kube_ctl_stop(kube_ctl *ctl);
bool kube_ctl_synced(kube_ctl *ctl);

/* Reconcilers: 0, or a negative errno (rate-limited retry). *ret_requeue µs (0 = none). */
int kube_reconcile_sandbox(kube_ctl *ctl, const char *ns, const char *name, int64_t *ret_requeue);
int kube_reconcile_template(kube_ctl *ctl, const char *ns, const char *name, int64_t *ret_requeue);
int kube_reconcile_pool(kube_ctl *ctl, const char *ns, const char *name, int64_t *ret_requeue);
int kube_reconcile_claim(kube_ctl *ctl, const char *ns, const char *name, int64_t *ret_requeue);
int kube_reconcile_snapshot(kube_ctl *ctl, const char *ns, const char *name,
                            int64_t *ret_requeue);

/* Forks on a cluster (kube-snapshot.c): a Sandbox whose container image is `snapshot:NAME`.
 * The snapshot NAME it starts from, borrowed from sb, or NULL when it is no fork. */
const char *kube_snapshot_of_sandbox(const json_t *sb);
/* The dataSource (*ret owned) of the PVC of volumeClaimTemplate `volume` of a fork: the
 * VolumeSnapshot of that volume. *ret NULL when the snapshot has no such volume (the PVC starts
 * empty). -EAGAIN with *ret_why (static) while the snapshot is missing or not Ready. */
int kube_snapshot_data_source(kube_ctl *ctl, const char *ns, const char *snapshot,
                              const char *volume, json_t **ret, const char **ret_why);
/* Replaces in a fork's pod spec every `snapshot:NAME` image by the image the snapshot recorded
 * for that container (its source's). -EAGAIN with *ret_why while the snapshot is not Ready. */
int kube_snapshot_pod_images(kube_ctl *ctl, const char *ns, const char *snapshot, json_t *spec,
                             const char **ret_why);

/* Merge patch of an object (sub NULL or "status"); with lock_rv, the object's resourceVersion
 * is added so a concurrent change answers 409 (-ESTALE). ret_obj optional (owned). */
int kube_patch(kube_ctl *ctl, kube_res r, const json_t *obj, const char *sub, const json_t *patch,
               bool lock_rv, json_t **ret_obj);
/* DELETE with preconditions.uid of obj and the propagation policy (NULL = Background). A
 * missing object is success. */
int kube_delete(kube_ctl *ctl, kube_res r, const json_t *obj, const char *propagation);
int kube_create(kube_ctl *ctl, kube_res r, const char *ns, const json_t *obj, json_t **ret_obj);
/* Records a core/v1 Event about obj (type "Normal" or "Warning"); failures are only logged. */
void kube_event(kube_ctl *ctl, const json_t *obj, const char *type, const char *reason,
                const char *message);

/* Leader election (kube-leader.c): blocks until this process holds the Lease (or stop); then a
 * renew thread keeps it and calls lost() when it cannot renew within the deadline. */
int kube_leader_acquire(kube_ctl *ctl, const char *ns, const char *name);
void kube_leader_release(kube_ctl *ctl, const char *ns, const char *name);

/* Metrics text (kube-metrics.c). Owned. */
char *kube_metrics_render(kube_ctl *ctl);
void kube_metrics_observe_creation(kube_ctl *ctl, double ms);
void kube_metrics_observe_claim(kube_ctl *ctl, double ms);
/* agent_sandbox_claim_creation_total{namespace, sandbox_template, launch_type, warmpool_name,
 * pod_condition, created_by} += 1. */
void kube_metrics_claim_created(kube_ctl *ctl, const char *ns, const char *tmpl,
                                const char *launch_type, const char *pool, bool ready,
                                const char *created_by);

/* Small helpers (kube-util.c). */
const char *kube_str(const json_t *obj, const char *path); /* "metadata.name" -> borrowed */
bool kube_is_system_key(const char *key);
