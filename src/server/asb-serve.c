/* `asb serve`: the local control plane. State directory, bearer token, SQLite store, the API
 * server, and a clean exit on SIGTERM/SIGINT. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asb/client.h"
#include "basic/fs-util.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/state-files.h"
#include "basic/time-util.h"
#include "server/server.h"
#include "local/apiserver/local-apiserver.h"
#include "local/runtime/local-cleanup.h"
#include "local/controller/local-controller.h"
#include "local/container/local-limits.h"
#include "local/reconcile/local-reconcile.h"
#include "local/snapshot/local-snapshot.h"
#include "local/store/local-store.h"
#include "router/router.h"
#include "shared/claim-header.h"
#include "shared/log.h"

#define DEFAULT_LISTEN "127.0.0.1:7443"
#define DEFAULT_ROUTER_LISTEN "127.0.0.1:7080"
#define DEFAULT_WATCH_WINDOW 10000

/* Over ~80 lines: one help text, printed by one fprintf. */
static void serve_usage(FILE *f)
{
    fprintf(
        f,
        "Usage: asb serve [--listen HOST:PORT] [--router-listen HOST:PORT]\n"
        "                 [--network bridge|none] [--pod-cidr CIDR] [--bridge NAME]\n"
        "                 [--dns-upstream IP[:PORT]] [--dns-rate QPS] [--dns-burst N]\n"
        "                 [--dns-inflight N] [--max-connections N]\n"
        "                 [--max-connection-rate N]\n"
        "                 [--default-memory Q] [--default-cpu Q]\n"
        "                 [--default-ephemeral-storage Q] [--userns-range START:COUNT|off]\n"
        "       asb serve --cleanup [--bridge NAME]\n\n"
        "Runs the local control plane: a Kubernetes-shaped API for Sandbox, SandboxTemplate,\n"
        "SandboxWarmPool and SandboxClaim objects, stored in $ASB_STATE_DIR (default\n"
        "/var/lib/asb as root, ~/.local/state/asb otherwise).\n\n"
        "Options:\n"
        "  --listen HOST:PORT  API address (default " DEFAULT_LISTEN "; port 0 picks a free one)\n"
        "  --router-listen HOST:PORT\n"
        "                      data-plane router address (default " DEFAULT_ROUTER_LISTEN ";\n"
        "                      \"off\" disables it); its URL goes to $ASB_STATE_DIR/router\n"
        "  --router-allow-unauthenticated\n"
        "                      the router admits token-less requests from loopback peers\n"
        "  --preview-domain D  preview hosts PORT-SANDBOX.NAMESPACE.D on the router\n"
        "                      (default localhost; \"\" turns them off)\n"
        "  --network MODE      sandbox networking: bridge (default: own namespace, veth to a\n"
        "                      host bridge, NAT, DNS forwarder, NetworkPolicy in nftables)\n"
        "                      or none (loopback only); env ASB_NETWORK; env\n"
        "                      ASB_NET_PREPARED=N|off: networks made ahead besides the\n"
        "                      warm pools' demand (default 4)\n"
        "  --pod-cidr CIDR     sandbox addresses; refused when it overlaps a route, another\n"
        "                      asb serve's bridge or nft table (default: the first free /24\n"
        "                      of 10.244.0.0/16, kept in the state dir); env ASB_POD_CIDR\n"
        "  --bridge NAME       host bridge (default asb + a hash of the state dir); env\n"
        "                      ASB_BRIDGE\n"
        "  --dns-upstream ADDR resolver the DNS forwarder asks (default: the first\n"
        "                      nameserver of /etc/resolv.conf); env ASB_DNS_UPSTREAM\n"
        "  --dns-rate QPS      DNS queries per second of one sandbox (default 50); env\n"
        "                      ASB_DNS_RATE\n"
        "  --dns-burst N       DNS queries of one sandbox at once after a quiet time\n"
        "                      (default 100); env ASB_DNS_BURST\n"
        "  --dns-inflight N    DNS queries of one sandbox waiting for the upstream at once\n"
        "                      (default 32); env ASB_DNS_INFLIGHT\n"
        "  --max-connections N connections one sandbox may have open at once through the\n"
        "                      host (its conntrack entries: TCP, UDP flows, DNS to the\n"
        "                      forwarder); past it new TCP connections are reset (default\n"
        "                      %u); env ASB_MAX_CONNECTIONS\n"
        "  --max-connection-rate N\n"
        "                      new connections per second of one sandbox, %u times that\n"
        "                      at once (default %u); env ASB_MAX_CONNECTION_RATE\n"
        "  --default-memory Q  memory limit of a container that sets none (a Kubernetes\n"
        "                      quantity, default " LOCAL_LIMITS_DEFAULT_MEMORY
        "; 0 or none: no limit); env\n"
        "                      ASB_DEFAULT_MEMORY\n"
        "  --default-cpu Q     CPU limit (CFS quota) of a container that sets none "
        "(default " LOCAL_LIMITS_DEFAULT_CPU ";\n"
        "                      0 or none: no limit); env ASB_DEFAULT_CPU\n"
        "  --default-ephemeral-storage Q\n"
        "                      size of the filesystem that holds the workspace, home and /tmp\n"
        "                      of a sandbox whose container sets no\n"
        "                      resources.limits.ephemeral-storage "
        "(default " LOCAL_LIMITS_DEFAULT_EPHEMERAL_STORAGE ";\n"
        "                      0 or none: no limit); env ASB_DEFAULT_EPHEMERAL_STORAGE\n"
        "  --userns-range START:COUNT\n"
        "                      host uids/gids for sandbox user namespaces, 65536 per sandbox\n"
        "                      (default: a free block of 2^26 ids from 2^31, kept across\n"
        "                      restarts; \"off\": no user namespaces); env ASB_USERNS_RANGE\n"
        "  --cleanup           remove from the host everything this state dir made there\n"
        "                      (containers, cgroups, network namespaces, bridge, nft table,\n"
        "                      mounts) and exit; refused while asb serve runs\n"
        "  -h, --help          show this help\n\n"
        "Environment: ASB_STATE_DIR, ASB_WATCH_WINDOW (events kept for watches, default %d),\n"
        "ASB_BOOKMARK_INTERVAL (watch bookmark cadence, Go duration, default 60s),\n"
        "ASB_RUNTIME (OCI runtime CLI for sandboxes, default runc; \"none\" stores Sandboxes\n"
        "without running them), ASB_SANDBOXD (sandboxd binary injected into sandboxes,\n"
        "default: the sandboxd next to asb), ASB_TOOLBOX (geminicli-toolbox injected too,\n"
        "default: the one next to sandboxd, skipped when absent), ASB_RESYNC_INTERVAL (full\n"
        "reconcile pass after this much quiet: liveness of sandboxes, default 10s),\n"
        "ASB_RUNTIME_CLASSES (runtimeClassName handlers, \"name=binary,...\"; built in: runc,\n"
        "crun, runsc, gvisor, kata), ASB_IMAGE_GC_IDLE (unpacked oci: images no running\n"
        "sandbox uses are removed after this long, default 10m), ASB_TEARDOWN_WORKERS\n"
        "(deleted sandboxes torn down in parallel, default 4), ASB_TEARDOWN_GRACE (how long\n"
        "SIGTERM waits for pending teardowns, default 10s; the rest finish at the next start),\n"
        "ASB_SANDBOX_LOG_MAX (bytes of a sandbox's sandboxd output kept, rotated once, default\n"
        "1 MiB).\n",
        LOCAL_NET_MAX_CONNECTIONS_DEFAULT, LOCAL_NET_CONNECTION_BURST,
        LOCAL_NET_CONNECTION_RATE_DEFAULT, DEFAULT_WATCH_WINDOW);
}

/* The one default-state-dir rule, shared with every libasb client. */
static char *state_dir(void)
{
    char *dir = NULL;
    return asb_client_default_state_dir(&dir) == ASB_OK ? dir : NULL;
}

/* Writes content to dir/name atomically with the given mode. */
static int write_file_atomic(const char *dir, const char *name, const char *content, mode_t mode)
{
    _cleanup_free_ char *tmp = NULL, *dst = NULL;
    if (asprintf(&tmp, "%s/.%s.tmp", dir, name) < 0 || asprintf(&dst, "%s/%s", dir, name) < 0)
        return -ENOMEM;
    unlink(tmp);
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    size_t n = strlen(content);
    if (fchmod(fd, mode) < 0 || write(fd, content, n) != (ssize_t)n || fsync(fd) < 0) {
        int r = -errno;
        unlink(tmp);
        return r ? r : -EIO;
    }
    if (rename(tmp, dst) < 0)
        return -errno;
    return 0;
}

/* The URL files go (at start: an earlier run's are stale; at a clean stop: the server is gone),
 * so no client dials a server that is not there. 0, or the first error other than ENOENT. */
static int remove_url_files(const char *dir)
{
    const char *files[] = {STATE_FILE_SERVER, STATE_FILE_ROUTER};
    int ret = 0;
    for (size_t i = 0; i < ELEMENTSOF(files); i++) {
        _cleanup_free_ char *f = NULL;
        if (asprintf(&f, "%s/%s", dir, files[i]) < 0)
            return -ENOMEM;
        if (unlink(f) < 0 && errno != ENOENT && ret == 0)
            ret = -errno;
    }
    return ret;
}

/* Takes the state directory's lock for the life of this process (the fd is kept open, close-on-exec
 * so no child inherits it) and writes our pid into it. A second `asb serve` on the same directory
 * is refused: two servers over one store and one set of containers would fight. Then the URL files
 * of an earlier run are removed, so clients wait for this run's instead of dialling a dead one. */
static int take_state_lock(const char *dir, int *ret_fd)
{
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/" STATE_FILE_LOCK, dir) < 0)
        return -ENOMEM;
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        fprintf(stderr, "asb serve: cannot open %s: %s\n", path, strerror(errno));
        return -errno;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e == EWOULDBLOCK)
            fprintf(
                stderr,
                "asb serve: another asb serve%s%s%s is running with state dir %s (it holds %s); "
                "stop it or use another ASB_STATE_DIR\n",
                *pid ? " (pid " : "", pid, *pid ? ")" : "", dir, path);
        else
            fprintf(stderr, "asb serve: cannot lock %s: %s\n", path, strerror(e));
        return -e;
    }
    char line[32];
    int len = snprintf(line, sizeof(line), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, line, (size_t)len, 0) != len) {
        fprintf(stderr, "asb serve: cannot write %s: %s\n", path, strerror(errno));
        return -errno;
    }
    int r = remove_url_files(dir);
    if (r < 0)
        return r;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

/* Reads the token, creating it (32 random bytes, hex) at first start. Owned result. */
static int load_token(const char *dir, char **ret)
{
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/token", dir) < 0)
        return -ENOMEM;
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (f) {
        char buf[256];
        if (!fgets(buf, sizeof(buf), f))
            return -EINVAL;
        buf[strcspn(buf, "\r\n")] = '\0';
        if (strlen(buf) < 16)
            return -EINVAL;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
    }
    if (errno != ENOENT)
        return -errno;
    unsigned char b[32];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        return -EIO;
    char hex[2 * sizeof(b) + 2];
    for (size_t i = 0; i < sizeof(b); i++)
        snprintf(hex + 2 * i, 3, "%02x", b[i]);
    strcat(hex, "\n");
    int r = write_file_atomic(dir, "token", hex, 0600);
    if (r < 0)
        return r;
    hex[2 * sizeof(b)] = '\0';
    *ret = strdup(hex);
    return *ret ? 0 : -ENOMEM;
}

/* URL clients use: a wildcard bind is reached on loopback. */
static char *server_url(const char *listen, uint16_t port)
{
    _cleanup_free_ char *host = strndup(listen, (size_t)(strrchr(listen, ':') - listen));
    if (!host)
        return NULL;
    const char *h = host;
    if (strcmp(h, "0.0.0.0") == 0 || strcmp(h, "") == 0)
        h = "127.0.0.1";
    else if (strcmp(h, "[::]") == 0)
        h = "[::1]";
    char *s = NULL;
    if (asprintf(&s, "http://%s:%u", h, port) < 0)
        return NULL;
    return s;
}

/* ASB_SANDBOXD, else the sandboxd installed next to this asb binary. Owned. */
static char *sandboxd_path(void)
{
    const char *e = getenv("ASB_SANDBOXD");
    if (e && *e)
        return strdup(e);
    _cleanup_free_ char *dir = NULL;
    if (self_exe_dir(&dir) < 0)
        return NULL;
    char *s = NULL;
    if (asprintf(&s, "%s/sandboxd", dir) < 0)
        return NULL;
    return s;
}

typedef struct serve_opts {
    const char *listen;
    const char *router_listen;
    bool router_listen_given;
    bool listen_given;
    bool router_allow_unauthenticated;
    const char *preview_domain;
    const char *network, *pod_cidr, *bridge, *dns_upstream;
    local_dns_limits dns_limits;
    unsigned max_connections; /* 0: LOCAL_NET_MAX_CONNECTIONS_DEFAULT */
    unsigned connection_rate; /* 0: LOCAL_NET_CONNECTION_RATE_DEFAULT */
    const char *default_memory, *default_cpu, *default_ephemeral; /* NULL: built in */
    local_limits defaults;
    const char *userns_range;
    bool cleanup;
    unsigned net_prepared; /* networks prepared ahead besides the warm pools' demand */
} serve_opts;

/* A network budget value (--dns-rate and co., --max-connections, --max-connection-rate): 1 to
 * 1000000. */
static int parse_dns_limit(const char *what, const char *v, unsigned *ret)
{
    char *end;
    if (!v || !*v)
        return 0;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || n < 1 || n > 1000000 || *v == '-' || *v == '+') {
        fprintf(stderr, "asb serve: --%s wants a number from 1 to 1000000, got \"%s\"\n", what,
                v);
        return -EINVAL;
    }
    *ret = (unsigned)n;
    return 0;
}

/* ASB_NET_PREPARED: 0 to 64 networks prepared ahead, or "off" (0). */
static int parse_net_prepared(const char *v, unsigned *ret)
{
    int64_t n;
    *ret = LOCAL_NET_PREPARED_DEFAULT;
    if (!v || !*v)
        return 0;
    if (strcmp(v, "off") == 0) {
        *ret = 0;
        return 0;
    }
    if (parse_go_int(v, &n) < 0 || n < 0 || n > 64) {
        fprintf(stderr, "asb serve: ASB_NET_PREPARED wants a number from 0 to 64 or off, got "
                        "\"%s\"\n", v);
        return -EINVAL;
    }
    *ret = (unsigned)n;
    return 0;
}

/* The defaults: built in, then the environment (ASB_NETWORK and co.); flags override them. */
static int opts_from_env(serve_opts *o)
{
    o->listen = DEFAULT_LISTEN;
    o->router_listen = DEFAULT_ROUTER_LISTEN;
    o->router_allow_unauthenticated = false;
    o->network = getenv("ASB_NETWORK");
    o->pod_cidr = getenv("ASB_POD_CIDR");
    o->bridge = getenv("ASB_BRIDGE");
    o->dns_upstream = getenv("ASB_DNS_UPSTREAM");
    if (parse_dns_limit("dns-rate", getenv("ASB_DNS_RATE"), &o->dns_limits.rate) < 0 ||
        parse_dns_limit("dns-burst", getenv("ASB_DNS_BURST"), &o->dns_limits.burst) < 0 ||
        parse_dns_limit("dns-inflight", getenv("ASB_DNS_INFLIGHT"), &o->dns_limits.inflight) < 0 ||
        parse_dns_limit("max-connections", getenv("ASB_MAX_CONNECTIONS"),
                        &o->max_connections) < 0 ||
        parse_dns_limit("max-connection-rate", getenv("ASB_MAX_CONNECTION_RATE"),
                        &o->connection_rate) < 0)
        return -EINVAL;
    o->default_memory = getenv("ASB_DEFAULT_MEMORY");
    o->default_cpu = getenv("ASB_DEFAULT_CPU");
    o->default_ephemeral = getenv("ASB_DEFAULT_EPHEMERAL_STORAGE");
    o->userns_range = getenv("ASB_USERNS_RANGE");
    if (parse_net_prepared(getenv("ASB_NET_PREPARED"), &o->net_prepared) < 0)
        return -EINVAL;
    return 0;
}

/* What no flag alone can check. 1, or -EINVAL once said why. */
static int check_args(serve_opts *o)
{
    /* Without --router-listen, an API on a free port gets a router on a free port too (tests run
     * many servers side by side). */
    const char *lc = strrchr(o->listen, ':');
    if (!o->router_listen_given && lc && strcmp(lc, ":0") == 0)
        o->router_listen = "127.0.0.1:0";
    if (strcmp(o->router_listen, "off") != 0 && !strrchr(o->router_listen, ':')) {
        fprintf(stderr, "asb serve: --router-listen wants HOST:PORT or off, got \"%s\"\n",
                o->router_listen);
        return -EINVAL;
    }
    if (!strrchr(o->listen, ':')) {
        fprintf(stderr, "asb serve: --listen wants HOST:PORT, got \"%s\"\n", o->listen);
        return -EINVAL;
    }
    _cleanup_(api_error_clearp) api_error lerr = API_ERROR_INIT;
    if (local_limits_parse_defaults(o->default_memory, o->default_cpu, o->default_ephemeral,
                                    &o->defaults, &lerr) < 0) {
        fprintf(stderr, "asb serve: %s\n", lerr.message ?: strerror(EINVAL));
        return -EINVAL;
    }
    return 1;
}

/* 1: run; 0: done (--help); -EINVAL: a usage error, said. Over 100 lines: the option table and
 * one short case per flag, nothing else (each value's parsing is its own function). */
static int parse_args(int argc, char **argv, serve_opts *o)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"router-listen", required_argument, NULL, 'R'},
        {"router-allow-unauthenticated", no_argument, NULL, 'A'},
        {"preview-domain", required_argument, NULL, 'P'},
        {"network", required_argument, NULL, 'n'},
        {"pod-cidr", required_argument, NULL, 'c'},
        {"bridge", required_argument, NULL, 'b'},
        {"dns-upstream", required_argument, NULL, 'd'},
        {"dns-rate", required_argument, NULL, 'q'},
        {"dns-burst", required_argument, NULL, 'B'},
        {"dns-inflight", required_argument, NULL, 'I'},
        {"max-connections", required_argument, NULL, 'N'},
        {"max-connection-rate", required_argument, NULL, 'r'},
        {"default-memory", required_argument, NULL, 'M'},
        {"default-cpu", required_argument, NULL, 'C'},
        {"default-ephemeral-storage", required_argument, NULL, 'E'},
        {"userns-range", required_argument, NULL, 'U'},
        {"cleanup", no_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},
        {},
    };
    if (opts_from_env(o) < 0)
        return -EINVAL;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            o->listen = optarg;
            o->listen_given = true;
            break;
        case 'R':
            o->router_listen = optarg;
            o->router_listen_given = true;
            break;
        case 'A':
            o->router_allow_unauthenticated = true;
            break;
        case 'P':
            o->preview_domain = optarg;
            break;
        case 'n':
            o->network = optarg;
            break;
        case 'c':
            o->pod_cidr = optarg;
            break;
        case 'b':
            o->bridge = optarg;
            break;
        case 'd':
            o->dns_upstream = optarg;
            break;
        case 'q':
            if (parse_dns_limit("dns-rate", optarg, &o->dns_limits.rate) < 0)
                return -EINVAL;
            break;
        case 'B':
            if (parse_dns_limit("dns-burst", optarg, &o->dns_limits.burst) < 0)
                return -EINVAL;
            break;
        case 'I':
            if (parse_dns_limit("dns-inflight", optarg, &o->dns_limits.inflight) < 0)
                return -EINVAL;
            break;
        case 'N':
            if (parse_dns_limit("max-connections", optarg, &o->max_connections) < 0)
                return -EINVAL;
            break;
        case 'r':
            if (parse_dns_limit("max-connection-rate", optarg, &o->connection_rate) < 0)
                return -EINVAL;
            break;
        case 'M':
            o->default_memory = optarg;
            break;
        case 'C':
            o->default_cpu = optarg;
            break;
        case 'E':
            o->default_ephemeral = optarg;
            break;
        case 'U':
            o->userns_range = optarg;
            break;
        case 'K':
            o->cleanup = true;
            break;
        case 'h':
            serve_usage(stdout);
            return 0;
        default:
            serve_usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "asb serve: unexpected argument \"%s\"\n", argv[optind]);
        return -EINVAL;
    }
    return check_args(o);
}

static size_t env_size(const char *name, size_t def)
{
    const char *v = getenv(name);
    int64_t n;
    if (v && *v && parse_go_int(v, &n) == 0 && n > 0)
        return (size_t)n;
    return def;
}

static usec_t env_duration(const char *name, usec_t def)
{
    const char *v = getenv(name);
    usec_t d;
    if (v && *v && parse_go_duration(v, &d) == 0 && d > 0)
        return d;
    return def;
}

/* A new claim adopts a Ready member in its create (local-controller.h): the answer's
 * Asb-Claim-Sandbox header says which (shared/claim-header.h). */
static void *plan_claim_adoption(void *ctl, const json_t *claim)
{
    return local_controller_plan_adoption(ctl, claim);
}

static int adopt_created_claim(void *ctl, void *plan, char **ret_value)
{
    json_t *after = NULL;
    int r = local_controller_adopt_planned(ctl, plan, &after);
    const json_t *sb = json_object_get(json_object_get(after, "status"), "sandbox");
    const char *name = json_string_value(json_object_get(sb, "name")),
               *uid = json_string_value(json_object_get(sb, "uid"));
    if (r > 0 && name && uid && asprintf(ret_value, "name=%s; uid=%s", name, uid) < 0)
        *ret_value = NULL;
    json_decref(after);
    return *ret_value ? 1 : 0;
}

static void drop_claim_adoption(void *ctl, void *plan)
{
    local_controller_drop_adoption(ctl, plan);
}

static const local_apiserver_create_hook claim_adoption_hook = {
    plan_claim_adoption, adopt_created_claim, drop_claim_adoption};

/* --cleanup: what the state dir made on the host goes; the files in it stay. */
static int serve_cleanup(const serve_opts *o, const char *dir)
{
    if (geteuid() != 0)
        fprintf(stderr, "asb serve --cleanup: not root: only what this user may remove goes\n");
    const char *runtime = getenv("ASB_RUNTIME");
    if (!runtime || !*runtime || strcmp(runtime, "none") == 0)
        runtime = "runc";
    local_net_options net = {.bridge = o->bridge};
    local_cleanup_report rep = {0};
    int r = local_cleanup(dir, runtime, &net, &rep);
    fprintf(stderr,
            "asb serve --cleanup: %s: removed %u containers, %u cgroups, %u mounts, %u loop "
            "devices, the bridge and the nft table%s\n",
            dir, rep.containers, rep.cgroups, rep.mounts, rep.loops,
            r < 0 ? "; some things are left (see the log above)" : "");
    return r < 0 ? 1 : 0;
}

/* What one `asb serve` holds, in start order. serve_stop undoes whatever was started, in the
 * reverse order, whichever step failed: the one teardown path. */
typedef struct serve_state {
    char *dir, *token, *url, *line, *router_url, *sandboxd;
    const char *runtime;
    int lock_fd;
    local_store *store;
    local_capacity capacity;
    bool have_capacity;
    local_apiserver *srv;
    local_idmap *idmap;
    local_reconciler *rec;
    local_controller *ctl;
    local_snapshotter *snapper;
    router *rt;
    bool stopped_by_signal; /* a clean stop also removes the cgroup parents */
} serve_state;

#define SERVE_STATE_INIT {.lock_fd = -1}

static void serve_stop(serve_state *s)
{
    router_stop(s->rt);
    /* The store's shutdown wakes every thread waiting on it, so that the stops below can join. */
    if (s->store)
        local_store_shutdown(s->store);
    local_snapshotter_stop(s->snapper);
    if (s->ctl) /* the API server stops calling into the controller before it is freed */
        local_apiserver_set_create_hook(s->srv, NULL, NULL, NULL, NULL);
    local_controller_stop(s->ctl);
    local_reconciler_stop(s->rec);
    if (s->stopped_by_signal)
        local_cleanup_cgroup_parents();
    local_apiserver_stop(s->srv);
    local_store_free(s->store);
    local_idmap_free(s->idmap);
    free(s->sandboxd);
    free(s->router_url);
    free(s->line);
    free(s->url);
    free(s->token);
    free(s->dir);
    safe_close(s->lock_fd);
}

/* The state directory (made, or tightened, to 0700), its lock, the token and the store. */
static int serve_open_state(serve_state *s)
{
    int r = mkdir_p(s->dir, 0700);
    if (r == 0 && chmod(s->dir, 0700) < 0) /* an existing state dir is tightened too */
        r = -errno;
    if (r < 0) {
        fprintf(stderr, "asb serve: state dir %s: %s\n", s->dir, strerror(-r));
        return r;
    }
    r = take_state_lock(s->dir, &s->lock_fd);
    if (r < 0)
        return r;
    r = load_token(s->dir, &s->token);
    if (r < 0) {
        fprintf(stderr, "asb serve: token in %s: %s\n", s->dir, strerror(-r));
        return r;
    }
    _cleanup_free_ char *dbpath = NULL;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    if (asprintf(&dbpath, "%s/state.db", s->dir) < 0)
        return -ENOMEM;
    r = local_store_open(dbpath, env_size("ASB_WATCH_WINDOW", DEFAULT_WATCH_WINDOW), &s->store,
                         &err);
    if (r < 0)
        fprintf(stderr, "asb serve: cannot open the store: %s\n", err.message ?: strerror(-r));
    return r;
}

/* A default port was taken (another asb serve, with another state directory) and a free one
 * chosen instead: said in the log; the URL goes to the state directory as always. */
static void log_chosen_port(const char *what, const char *default_listen, uint16_t port)
{
    char chosen[16], msg[64];
    snprintf(chosen, sizeof(chosen), "%u", (unsigned)port);
    snprintf(msg, sizeof(msg), "%s default port in use, listening on a free port", what);
    log_warn(msg, "default", default_listen, "port", chosen);
}

/* The API server, and the URL clients will read from $ASB_STATE_DIR/server. */
static int serve_start_api(serve_opts *o, serve_state *s)
{
    /* What the machine has: specs asking more are warned about, and not started when they
     * request it (local-capacity.h). */
    s->have_capacity = local_capacity_read(s->dir, &s->capacity) == 0;
    local_apiserver_options ao = {
        .capacity = s->have_capacity ? &s->capacity : NULL,
        .listen = o->listen,
        .token = s->token,
        .store = s->store,
        .bookmark_interval = env_duration("ASB_BOOKMARK_INTERVAL", 60 * USEC_PER_SEC),
    };
    uint16_t port = 0;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    int r = local_apiserver_start(&ao, &s->srv, &port, &err);
    if (r == -EADDRINUSE && !o->listen_given) {
        api_error_clear(&err);
        ao.listen = o->listen = "127.0.0.1:0";
        r = local_apiserver_start(&ao, &s->srv, &port, &err);
        if (r >= 0)
            log_chosen_port("API", DEFAULT_LISTEN, port);
    }
    if (r < 0) {
        fprintf(stderr, "asb serve: %s\n", err.message ?: strerror(-r));
        return r;
    }
    s->url = server_url(o->listen, port);
    if (!s->url || asprintf(&s->line, "%s\n", s->url) < 0) {
        s->line = NULL;
        fprintf(stderr, "asb serve: %s\n", strerror(ENOMEM));
        return -ENOMEM;
    }
    return 0;
}

/* Each sandbox's user namespace ids, from a range no other asb serve and no host account has:
 * refused before any sandbox starts. Only as root with a runtime. */
static int serve_open_idmap(const serve_opts *o, serve_state *s)
{
    if (strcmp(s->runtime, "none") == 0 || geteuid() != 0)
        return 0;
    _cleanup_(api_error_clearp) api_error ierr = API_ERROR_INIT;
    local_idmap_options io = {.state_dir = s->dir, .range = o->userns_range};
    int r = local_idmap_open(&io, &s->idmap, &ierr);
    if (r < 0) {
        fprintf(stderr, "asb serve: %s\n", ierr.message ?: strerror(-r));
        return r;
    }
    if (s->idmap) {
        uint32_t us, uc;
        char range[48];
        local_idmap_range(s->idmap, &us, &uc);
        snprintf(range, sizeof(range), "%u:%u", (unsigned)us, (unsigned)uc);
        log_info("sandbox user namespaces", "userns_range", range);
    } else
        log_warn("sandbox user namespaces are off: sandbox ids are host ids");
    return 0;
}

/* The Sandbox reconciler: started after the API so a slow first resync never delays it. */
static int serve_start_reconciler(const serve_opts *o, serve_state *s)
{
    if (strcmp(s->runtime, "none") == 0)
        return 0;
    local_reconciler_options ro = {
        .store = s->store,
        .state_dir = s->dir,
        .sandboxd = s->sandboxd ? s->sandboxd : "sandboxd",
        .runtime = s->runtime,
        .resync_interval = env_duration("ASB_RESYNC_INTERVAL", 10 * USEC_PER_SEC),
        .image_gc_idle = env_duration("ASB_IMAGE_GC_IDLE", 10 * 60 * USEC_PER_SEC),
        .teardown_workers = env_size("ASB_TEARDOWN_WORKERS", 4),
        .teardown_grace = env_duration("ASB_TEARDOWN_GRACE", 10 * USEC_PER_SEC),
        .log_max = env_size("ASB_SANDBOX_LOG_MAX", 1024 * 1024),
        .net = {.mode = o->network, .pod_cidr = o->pod_cidr, .bridge = o->bridge,
                .dns_upstream = o->dns_upstream, .dns_limits = o->dns_limits,
                .prepared = o->net_prepared, .max_connections = o->max_connections,
                .connection_rate = o->connection_rate},
        .defaults = o->defaults,
        .capacity = s->have_capacity ? &s->capacity : NULL,
        .idmap = s->idmap};
    int r = local_reconciler_start(&ro, &s->rec);
    if (r < 0)
        fprintf(stderr, "asb serve: cannot start the sandbox reconciler: %s\n", strerror(-r));
    return r;
}

/* Templates, warm pools, claims and owner garbage collection (off with
 * ASB_CLAIM_CONTROLLER=off). */
static int serve_start_controller(serve_state *s)
{
    const char *cc = getenv("ASB_CLAIM_CONTROLLER");
    if (cc && strcmp(cc, "off") == 0)
        return 0;
    local_controller_options co = {
        .store = s->store,
        .readiness_grace = env_duration("ASB_WARM_POOL_READINESS_GRACE", 0),
        .label_domains = getenv("ASB_ALLOWED_LABEL_DOMAINS"),
    };
    int r = local_controller_start(&co, &s->ctl);
    if (s->ctl) /* a new claim adopts a Ready member in its own create (docs/claims.md) */
        local_apiserver_set_create_hook(s->srv,
                                        api_kind_by_plural(API_GROUP_EXT, "sandboxclaims"),
                                        CLAIM_HEADER_SANDBOX, &claim_adoption_hook, s->ctl);
    if (r < 0)
        fprintf(stderr, "asb serve: cannot start the claim controller: %s\n", strerror(-r));
    return r;
}

/* SandboxSnapshots: capture, and the garbage of deleted ones (docs/snapshots.md). */
static int serve_start_snapshotter(serve_state *s)
{
    local_snapshotter_options so = {.store = s->store, .state_dir = s->dir, .idmap = s->idmap};
    int r = local_snapshotter_start(&so, &s->snapper);
    if (r < 0)
        fprintf(stderr, "asb serve: cannot start the snapshotter: %s\n", strerror(-r));
    return r;
}

/* The data-plane router: sandboxes resolved through this API, resumed on demand; its URL goes
 * to $ASB_STATE_DIR/router. */
static int serve_start_router(serve_opts *o, serve_state *s)
{
    if (strcmp(o->router_listen, "off") == 0)
        return 0;
    router_resolver *res = NULL;
    int r = router_resolver_api_new(s->url, s->token, s->dir, 1000, 60000, &res);
    uint16_t rport = 0;
    _cleanup_free_ char *rline = NULL;
    _cleanup_(api_error_clear) api_error rerr = API_ERROR_INIT;
    router_options rop = {.listen = o->router_listen,
                          .token = s->token,
                          .allow_unauthenticated = o->router_allow_unauthenticated,
                          .resolver = res,
                          .preview_domain = o->preview_domain};
    if (r >= 0)
        r = router_start(&rop, &s->rt, &rport, &rerr);
    if (r == -EADDRINUSE && !o->router_listen_given) {
        /* The default port is taken (another asb serve): any free port, announced in
         * $ASB_STATE_DIR/router as always, and said. */
        api_error_clear(&rerr);
        rop.listen = o->router_listen = "127.0.0.1:0";
        r = router_start(&rop, &s->rt, &rport, &rerr);
        if (r >= 0)
            log_chosen_port("router", DEFAULT_ROUTER_LISTEN, rport);
    }
    if (r >= 0 && (!(s->router_url = server_url(o->router_listen, rport)) ||
                   asprintf(&rline, "%s\n", s->router_url) < 0)) {
        rline = NULL;
        r = -ENOMEM;
    }
    if (r >= 0)
        r = write_file_atomic(s->dir, "router", rline, 0644);
    if (r < 0) {
        fprintf(stderr, "asb serve: router: %s\n", rerr.message ? rerr.message : strerror(-r));
        if (res && !s->rt) /* a started router owns its resolver */
            res->free(res);
    }
    return r;
}

/* Signals are taken synchronously by the main thread; every server thread inherits the mask. */
static void block_signals(sigset_t *mask)
{
    sigemptyset(mask);
    sigaddset(mask, SIGTERM);
    sigaddset(mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, mask, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Starts everything in order; 0, or a negative errno once the failing step said why. */
static int serve_start(serve_opts *o, serve_state *s, sigset_t *mask)
{
    int r = serve_open_state(s);
    if (r < 0)
        return r;
    block_signals(mask);
    if ((r = serve_start_api(o, s)) < 0)
        return r;
    s->runtime = getenv("ASB_RUNTIME");
    if (!s->runtime || !*s->runtime)
        s->runtime = "runc";
    s->sandboxd = sandboxd_path();
    if ((r = serve_open_idmap(o, s)) < 0 || (r = serve_start_reconciler(o, s)) < 0 ||
        (r = serve_start_controller(s)) < 0 || (r = serve_start_snapshotter(s)) < 0 ||
        (r = serve_start_router(o, s)) < 0)
        return r;
    /* $ASB_STATE_DIR/server is what clients wait for (`asb serve &` then use it): written last,
     * so whoever sees it also finds $ASB_STATE_DIR/router. */
    r = write_file_atomic(s->dir, "server", s->line, 0644);
    if (r < 0)
        fprintf(stderr, "asb serve: cannot write %s/server: %s\n", s->dir, strerror(-r));
    return r;
}

int asb_serve(int argc, char **argv)
{
    serve_opts o = {0};
    int r = parse_args(argc, argv, &o);
    if (r <= 0)
        return r == 0 ? 0 : 2;
    log_setup("asb-serve", false, LOG_LEVEL_INFO);
    umask(077);

    _cleanup_(serve_stop) serve_state s = SERVE_STATE_INIT;
    s.dir = state_dir();
    if (!s.dir)
        return 1;
    if (o.cleanup) {
        /* Never under a running server's feet: its lock says whether one runs. */
        if (access(s.dir, F_OK) == 0 && take_state_lock(s.dir, &s.lock_fd) < 0)
            return 1;
        return serve_cleanup(&o, s.dir);
    }
    sigset_t mask;
    if (serve_start(&o, &s, &mask) < 0)
        return 1;
    char rvbuf[32];
    snprintf(rvbuf, sizeof(rvbuf), "%llu", (unsigned long long)local_store_current_rv(s.store));
    log_info("asb serve listening", "url", s.url, "router", s.router_url ? s.router_url : "off",
             "state", s.dir, "resourceVersion", rvbuf);

    int sig = 0;
    while (sigwait(&mask, &sig) != 0)
        ;
    log_info("asb serve shutting down", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    (void)remove_url_files(s.dir);
    s.stopped_by_signal = true;
    return 0;
}
