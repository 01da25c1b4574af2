/* sandbox-router: the router as its own process (clusters, or a local state directory). */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asb/client.h"
#include "basic/macro.h"
#include "router/router.h"
#include "shared/log.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: sandbox-router [OPTIONS]\n\n"
        "Routes HTTP/1.1 and HTTP/2 (h2c) requests to sandboxes by X-Sandbox-ID,\n"
        "X-Sandbox-Namespace and X-Sandbox-Port: REST to sandboxd's REST endpoint, gRPC to its\n"
        "gRPC endpoint, port 8888 to the legacy python-runtime layer.\n\n"
        "Options:\n"
        "  --listen HOST:PORT           listen address (default 0.0.0.0:8080)\n"
        "  --state-dir DIR              local mode: resolve sandboxes through the control plane\n"
        "                               of this asb state directory ($DIR/server, $DIR/token)\n"
        "                               to $DIR/run/<uid>/{rest,grpc}.sock, resuming suspended\n"
        "                               sandboxes\n"
        "  --target-template TEMPLATE   upstream pattern with {id} {namespace} {port} {socket}\n"
        "                               (default {id}.{namespace}.svc.CLUSTER_DOMAIN:{port});\n"
        "                               \"unix:/path/{id}/{socket}.sock\" targets unix sockets\n"
        "  --cluster-domain DOMAIN      for the default template (default $CLUSTER_DOMAIN or\n"
        "                               cluster.local)\n"
        "  --token TOKEN                required bearer token (default $ROUTER_AUTH_TOKEN, else\n"
        "                               the state directory's token)\n"
        "  --token-file PATH            read the bearer token from PATH\n"
        "  --allow-unauthenticated      admit requests without a token from loopback peers\n"
        "                               (alias --router-allow-unauthenticated); with no token\n"
        "                               configured at all, every peer is admitted\n"
        "  --proxy-timeout SECONDS      time allowed for the first response byte (default\n"
        "                               $PROXY_TIMEOUT_SECONDS or 180)\n"
        "  --resume-timeout SECONDS     wait for a resumed sandbox to be Ready (default 60)\n"
        "  --header-timeout SECONDS     a request head must be complete this long after it\n"
        "                               began, else the connection closes (default 10; 0: none)\n"
        "  --max-connections N          open client connections; at the cap a new connection\n"
        "                               closes the oldest one still sending its request head\n"
        "                               or idle (default: half the fd limit, at most 4096)\n"
        "  --preview-domain DOMAIN      preview hosts PORT-SANDBOX.NAMESPACE.DOMAIN route to a\n"
        "                               sandbox port (default localhost; \"\" turns them off)\n"
        "  -h, --help                   show this help\n");
}

static char *read_token_file(const char *path)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char buf[512];
    if (!fgets(buf, sizeof(buf), f))
        return NULL;
    buf[strcspn(buf, "\r\n")] = '\0';
    return *buf ? strdup(buf) : NULL;
}

static char *trimmed_env(const char *name)
{
    const char *v = getenv(name);
    if (!v)
        return NULL;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n'))
        n--;
    return n ? strndup(v, n) : NULL;
}

static bool truthy(const char *v)
{
    static const char *const t[] = {"1", "true", "t", "yes", "y", "on"};
    if (!v)
        return false;
    for (size_t i = 0; i < 6; i++)
        if (strcasecmp(v, t[i]) == 0)
            return true;
    return false;
}

/* What the command line and the environment ask. */
typedef struct router_args {
    const char *listen, *state_dir, *tmpl, *domain, *preview_domain;
    char *token; /* owned */
    bool allow;
    double proxy_timeout, resume_timeout, header_timeout;
    long max_connections;
} router_args;

static void router_args_done(router_args *a)
{
    free(a->token);
}

/* Flags (and PROXY_TIMEOUT_SECONDS, ALLOW_UNAUTHENTICATED_ROUTER) into a; -1 when the program
 * goes on, else its exit code after saying why. */
static int parse_args(int argc, char **argv, router_args *a)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"state-dir", required_argument, NULL, 's'},
        {"target-template", required_argument, NULL, 't'},
        {"cluster-domain", required_argument, NULL, 'c'},
        {"token", required_argument, NULL, 'T'},
        {"token-file", required_argument, NULL, 'F'},
        {"allow-unauthenticated", no_argument, NULL, 'a'},
        {"router-allow-unauthenticated", no_argument, NULL, 'a'},
        {"proxy-timeout", required_argument, NULL, 'p'},
        {"resume-timeout", required_argument, NULL, 'r'},
        {"header-timeout", required_argument, NULL, 'H'},
        {"max-connections", required_argument, NULL, 'm'},
        {"preview-domain", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {},
    };
    const char *pt = getenv("PROXY_TIMEOUT_SECONDS");
    if (pt && *pt)
        a->proxy_timeout = strtod(pt, NULL);
    a->allow = truthy(getenv("ALLOW_UNAUTHENTICATED_ROUTER"));
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            a->listen = optarg;
            break;
        case 's':
            a->state_dir = optarg;
            break;
        case 't':
            a->tmpl = optarg;
            break;
        case 'c':
            a->domain = optarg;
            break;
        case 'T':
            free(a->token);
            a->token = strdup(optarg);
            break;
        case 'F':
            free(a->token);
            a->token = read_token_file(optarg);
            if (!a->token) {
                fprintf(stderr, "sandbox-router: cannot read a token from %s\n", optarg);
                return 2;
            }
            break;
        case 'a':
            a->allow = true;
            break;
        case 'p':
            a->proxy_timeout = strtod(optarg, NULL);
            break;
        case 'r':
            a->resume_timeout = strtod(optarg, NULL);
            break;
        case 'H':
            a->header_timeout = strtod(optarg, NULL);
            break;
        case 'm':
            a->max_connections = strtol(optarg, NULL, 10);
            if (a->max_connections < 1) {
                fprintf(stderr, "sandbox-router: --max-connections must be at least 1\n");
                return 2;
            }
            break;
        case 'P':
            a->preview_domain = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sandbox-router: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    return -1;
}

/* The bearer token: a flag's, else $ROUTER_AUTH_TOKEN, else the state directory's; none only
 * with --allow-unauthenticated. -1 when the program goes on, else its exit code. */
static int find_token(router_args *a)
{
    if (!a->token)
        a->token = trimmed_env("ROUTER_AUTH_TOKEN");
    if (!a->token && a->state_dir) {
        _cleanup_free_ char *p = NULL;
        if (asprintf(&p, "%s/token", a->state_dir) > 0)
            a->token = read_token_file(p);
    }
    if (!a->token && !a->allow) {
        fprintf(stderr, "sandbox-router: no token configured (--token, --token-file, "
                        "ROUTER_AUTH_TOKEN or --state-dir); pass --allow-unauthenticated to run "
                        "without one\n");
        return 2;
    }
    return -1;
}

/* The resolver: a target template (upstream's cluster DNS form by default), or asb serve's API
 * when only --state-dir is given. -1 with *ret set, else the exit code after saying why. */
static int make_resolver(router_args *a, router_resolver **ret)
{
    int r;
    if (a->tmpl || !a->state_dir) {
        _cleanup_free_ char *def = NULL;
        const char *tmpl = a->tmpl;
        if (!tmpl) {
            const char *domain = a->domain;
            if (!domain)
                domain = getenv("CLUSTER_DOMAIN");
            if (!domain || !*domain)
                domain = "cluster.local";
            if (asprintf(&def, "{id}.{namespace}.svc.%s:{port}", domain) < 0)
                return 1;
            tmpl = def;
        }
        r = router_resolver_template_new(tmpl, ret);
    } else {
        _cleanup_free_ char *server = NULL, *sp = NULL;
        if (asprintf(&sp, "%s/server", a->state_dir) > 0)
            server = read_token_file(sp);
        if (!server) {
            fprintf(stderr,
                    "sandbox-router: no control plane URL in %s/server (is asb serve "
                    "running?)\n",
                    a->state_dir);
            return 1;
        }
        _cleanup_free_ char *cp_token = NULL, *tp = NULL;
        if (asprintf(&tp, "%s/token", a->state_dir) > 0)
            cp_token = read_token_file(tp);
        r = router_resolver_api_new(server, cp_token ? cp_token : a->token, a->state_dir, 1000,
                                    (long)(a->resume_timeout * 1000), ret);
    }
    if (r < 0) {
        fprintf(stderr, "sandbox-router: %s\n", strerror(-r));
        return 1;
    }
    return -1;
}

int main(int argc, char **argv)
{
    _cleanup_(router_args_done)
        router_args a = {.listen = "0.0.0.0:8080", .resume_timeout = 60, .header_timeout = 10};
    int ret = parse_args(argc, argv, &a);
    if (ret >= 0)
        return ret;
    log_setup("sandbox-router", false, LOG_LEVEL_INFO);
    signal(SIGPIPE, SIG_IGN);
    router_resolver *res = NULL;
    if ((ret = find_token(&a)) >= 0 || (ret = make_resolver(&a, &res)) >= 0)
        return ret;
    router_options o = {
        .listen = a.listen,
        .token = a.token,
        .allow_unauthenticated = a.allow,
        .resolver = res,
        .proxy_timeout_ms = (long)(a.proxy_timeout * 1000),
        .header_timeout_ms = a.header_timeout > 0 ? (long)(a.header_timeout * 1000) : -1,
        .max_connections = (unsigned)a.max_connections,
        .preview_domain = a.preview_domain,
    };
    router *rt = NULL;
    uint16_t port = 0;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    int r = router_start(&o, &rt, &port, &err);
    if (r < 0) {
        fprintf(stderr, "sandbox-router: %s\n", err.message ? err.message : strerror(-r));
        res->free(res);
        return 1;
    }
    char portbuf[16];
    snprintf(portbuf, sizeof(portbuf), "%u", port);
    log_info("sandbox-router listening", "listen", a.listen, "port", portbuf);
    /* The bound port on stdout's first line, for scripts that pass port 0. */
    printf("%u\n", port);
    fflush(stdout);
    int sig = 0;
    while (sigwait(&mask, &sig) != 0)
        ;
    router_stop(rt);
    return 0;
}
