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

int main(int argc, char **argv)
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
    const char *listen = "0.0.0.0:8080", *state_dir = NULL, *tmpl = NULL, *domain = NULL,
               *preview_domain = NULL;
    _cleanup_free_ char *token = NULL;
    bool allow = truthy(getenv("ALLOW_UNAUTHENTICATED_ROUTER"));
    double proxy_timeout = 0, resume_timeout = 60, header_timeout = 10;
    long max_connections = 0;
    const char *pt = getenv("PROXY_TIMEOUT_SECONDS");
    if (pt && *pt)
        proxy_timeout = strtod(pt, NULL);
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            listen = optarg;
            break;
        case 's':
            state_dir = optarg;
            break;
        case 't':
            tmpl = optarg;
            break;
        case 'c':
            domain = optarg;
            break;
        case 'T':
            free(token);
            token = strdup(optarg);
            break;
        case 'F':
            free(token);
            token = read_token_file(optarg);
            if (!token) {
                fprintf(stderr, "sandbox-router: cannot read a token from %s\n", optarg);
                return 2;
            }
            break;
        case 'a':
            allow = true;
            break;
        case 'p':
            proxy_timeout = strtod(optarg, NULL);
            break;
        case 'r':
            resume_timeout = strtod(optarg, NULL);
            break;
        case 'H':
            header_timeout = strtod(optarg, NULL);
            break;
        case 'm':
            max_connections = strtol(optarg, NULL, 10);
            if (max_connections < 1) {
                fprintf(stderr, "sandbox-router: --max-connections must be at least 1\n");
                return 2;
            }
            break;
        case 'P':
            preview_domain = optarg;
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
    log_setup("sandbox-router", false, LOG_LEVEL_INFO);
    signal(SIGPIPE, SIG_IGN);
    if (!token)
        token = trimmed_env("ROUTER_AUTH_TOKEN");
    if (!token && state_dir) {
        _cleanup_free_ char *p = NULL;
        if (asprintf(&p, "%s/token", state_dir) > 0)
            token = read_token_file(p);
    }
    if (!token && !allow) {
        fprintf(stderr, "sandbox-router: no token configured (--token, --token-file, "
                        "ROUTER_AUTH_TOKEN or --state-dir); pass --allow-unauthenticated to run "
                        "without one\n");
        return 2;
    }
    router_resolver *res = NULL;
    int r;
    if (tmpl || !state_dir) {
        _cleanup_free_ char *def = NULL;
        if (!tmpl) {
            if (!domain)
                domain = getenv("CLUSTER_DOMAIN");
            if (!domain || !*domain)
                domain = "cluster.local";
            if (asprintf(&def, "{id}.{namespace}.svc.%s:{port}", domain) < 0)
                return 1;
            tmpl = def;
        }
        r = router_resolver_template_new(tmpl, &res);
    } else {
        _cleanup_free_ char *server = NULL, *sp = NULL;
        if (asprintf(&sp, "%s/server", state_dir) > 0)
            server = read_token_file(sp);
        if (!server) {
            fprintf(stderr,
                    "sandbox-router: no control plane URL in %s/server (is asb serve "
                    "running?)\n",
                    state_dir);
            return 1;
        }
        _cleanup_free_ char *cp_token = NULL, *tp = NULL;
        if (asprintf(&tp, "%s/token", state_dir) > 0)
            cp_token = read_token_file(tp);
        r = router_resolver_api_new(server, cp_token ? cp_token : token, state_dir, 1000,
                                    (long)(resume_timeout * 1000), &res);
    }
    if (r < 0) {
        fprintf(stderr, "sandbox-router: %s\n", strerror(-r));
        return 1;
    }
    router_options o = {
        .listen = listen,
        .token = token,
        .allow_unauthenticated = allow,
        .resolver = res,
        .proxy_timeout_ms = (long)(proxy_timeout * 1000),
        .header_timeout_ms = header_timeout > 0 ? (long)(header_timeout * 1000) : -1,
        .max_connections = (unsigned)max_connections,
        .preview_domain = preview_domain,
    };
    router *rt = NULL;
    uint16_t port = 0;
    _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    r = router_start(&o, &rt, &port, &err);
    if (r < 0) {
        fprintf(stderr, "sandbox-router: %s\n", err.message ? err.message : strerror(-r));
        res->free(res);
        return 1;
    }
    char portbuf[16];
    snprintf(portbuf, sizeof(portbuf), "%u", port);
    log_info("sandbox-router listening", "listen", listen, "port", portbuf);
    /* The bound port on stdout's first line, for scripts that pass port 0. */
    printf("%u\n", port);
    fflush(stdout);
    int sig = 0;
    while (sigwait(&mask, &sig) != 0)
        ;
    router_stop(rt);
    return 0;
}
