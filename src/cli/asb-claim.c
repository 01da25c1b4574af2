/* `asb claim --pool POOL [--ttl DURATION] [--name NAME] [--timeout DURATION]`: claims a sandbox
 * from a warm pool and prints its name alone on stdout once Ready (the claim name and the
 * latency go to stderr), so `sbx=$(asb claim --pool p)` works. Interrupted while waiting, the
 * claim is deleted (libasb's auto-cleanup). `asb release CLAIM...` deletes claims. */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "cli/asb-claim-progress.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void claim_usage(FILE *f)
{
    fprintf(f,
            "Usage: asb claim --pool POOL [--ttl DURATION] [--name NAME] [--timeout DURATION]\n\n"
            "Claim a sandbox from the SandboxWarmPool POOL and print the sandbox name once it\n"
            "is Ready (claim name and latency on stderr). Release it with `asb release CLAIM`.\n\n"
            "Options:\n"
            "  -p, --pool POOL          the SandboxWarmPool to claim from (required)\n"
            "      --ttl DURATION       spec.lifecycle.shutdownTime = now + DURATION (30s, 1h)\n"
            "      --policy POLICY      spec.lifecycle.shutdownPolicy with --ttl (Delete, "
            "DeleteForeground, Retain)\n"
            "      --name NAME          claim name (default: generated sandbox-claim-xxxxx)\n"
            "      --timeout DURATION   how long to wait for Ready (default 180s)\n"
            "  -h, --help               show this help\n" CLI_GLOBAL_HELP);
}

/* The Sandbox `name` of the current namespace, parsed; NULL when it cannot be read. Owned. */
static json_t *get_sandbox(asb_client *cl, const char *name)
{
    char *obj = NULL;
    if (asb_object_get(&obj, cl, "Sandbox", cli_namespace(), name) != ASB_OK)
        return NULL;
    json_t *o = json_loads(obj, 0, NULL);
    asb_free(obj);
    return o;
}

/* How the claim was served, from the launch-type label the claim controller puts on the sandbox
 * ("warm": adopted from the pool; "cold": created because no Ready member was free). NULL when
 * it cannot be told. Owned. */
static char *claim_launch_type(asb_client *cl, const char *sandbox)
{
    json_t *o = get_sandbox(cl, sandbox);
    const char *lt = json_string_value(json_object_get(
        json_object_get(json_object_get(o, "metadata"), "labels"), "agents.x-k8s.io/launch-type"));
    char *ret = lt ? strdup(lt) : NULL;
    json_decref(o);
    return ret;
}

/* The claim that owns sandbox `name` (its controller ownerReference of kind SandboxClaim), so that
 * `asb release "$sbx"` works with the name `asb claim` printed. NULL when there is none. Owned. */
static char *claim_of_sandbox(asb_client *cl, const char *name)
{
    json_t *o = get_sandbox(cl, name);
    char *ret = NULL;
    size_t i;
    json_t *ref;
    json_array_foreach (json_object_get(json_object_get(o, "metadata"), "ownerReferences"), i,
                        ref) {
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        const char *owner = json_string_value(json_object_get(ref, "name"));
        if (kind && owner && strcmp(kind, "SandboxClaim") == 0 &&
            json_is_true(json_object_get(ref, "controller"))) {
            ret = strdup(owner);
            break;
        }
    }
    json_decref(o);
    return ret;
}

int asb_claim_main(int argc, char **argv)
{
    enum { OPT_TTL = 0x2001, OPT_NAME, OPT_TIMEOUT, OPT_POLICY };
    static const struct option opts[] = {{"pool", required_argument, NULL, 'p'},
                                         {"ttl", required_argument, NULL, OPT_TTL},
                                         {"policy", required_argument, NULL, OPT_POLICY},
                                         {"name", required_argument, NULL, OPT_NAME},
                                         {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    asb_claim_options co = ASB_CLAIM_OPTIONS_INIT;
    const char *pool = NULL;
    long long ms;
    int c;
    while ((c = getopt_long(argc, argv, "p:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'p':
            pool = optarg;
            break;
        case OPT_NAME:
            co.name = optarg;
            break;
        case OPT_POLICY:
            co.shutdown_policy = optarg;
            break;
        case OPT_TTL:
        case OPT_TIMEOUT:
            if ((ms = cli_positive_duration_arg(optarg)) < 0)
                return 2;
            if (c == OPT_TTL)
                co.ttl_seconds = (long)((ms + 999) / 1000);
            else
                co.ready_timeout_ms = (long)ms;
            break;
        default:
            return cli_usage_option(c, argv, claim_usage);
        }
    }
    if (!pool || !*pool || optind != argc) {
        fprintf(stderr, "error: %s\n",
                !pool || !*pool ? "--pool POOL is required" : "unexpected arguments");
        return main_usage_error(claim_usage);
    }
    if (co.shutdown_policy && co.ttl_seconds == 0) {
        fprintf(stderr, "error: --policy needs --ttl\n");
        return 2;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    /* Ctrl-C while waiting deletes the claim; once we hand it over it is the user's. */
    co.auto_cleanup = 1;
    co.no_connect = 1;
    if (asb_claims_cleanup_install() != ASB_OK) {
        ret = cli_print_error(NULL);
        goto out;
    }
    /* Progress while the claim waits (a cold start takes seconds to minutes, an image unpack
     * more), for a person at a terminal only: silent when stdout is not a TTY, so
     * `sbx=$(asb claim ...)` prints nothing extra. */
    claim_progress *progress = NULL;
    if (isatty(STDOUT_FILENO)) {
        progress = claim_progress_start(cli_namespace(), co.name);
        co.progress = claim_progress_ready;
        co.progress_payload = progress;
    }
    asb_claim *claim = NULL;
    int cr = asb_claim_create(&claim, cl, cli_namespace(), pool, &co);
    progress = claim_progress_stop(progress);
    if (cr != ASB_OK) {
        const asb_error *e = asb_error_last();
        ret = cli_print_error(e && e->code == ASB_ECLAIMFAILED ? "claim failed" : NULL);
        goto out;
    }
    printf("%s\n", asb_claim_sandbox_name(claim));
    fflush(stdout);
    /* Adopted in its own create: a Ready warm member, nothing to read. */
    char *lt = asb_claim_sandbox_uid(claim) ? strdup("warm")
                                            : claim_launch_type(cl, asb_claim_sandbox_name(claim));
    fprintf(stderr, "claim %s ready in %.1f ms (sandbox %s), %s\n", asb_claim_name(claim),
            (double)asb_claim_ready_usec(claim) / 1000.0, asb_claim_sandbox_name(claim),
            !lt                       ? "served from the pool"
            : strcmp(lt, "warm") == 0 ? "served warm from a Ready pool member"
                                      : "served cold: no Ready pool member was free");
    free(lt);
    asb_claim_disconnect(claim);
out:
    asb_claims_cleanup_uninstall();
    asb_client_free(cl);
    return ret;
}

int asb_release(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'}, {"wait", no_argument, NULL, 'w'}, CLI_GLOBAL_LONG, {0}};
    bool wait = false;
    int c;
    while ((c = getopt_long(argc, argv, "hw" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c == 'w') {
            wait = true;
            continue;
        }
        if (c != 'h')
            return cli_usage_option(c, argv, NULL);
        FILE *f = c == 'h' ? stdout : stderr;
        fprintf(f, "Usage: asb release CLAIM|SANDBOX...\n\nDelete sandbox claims (their sandboxes "
                   "go with them); a\nclaimed sandbox's name releases the claim that holds it.\n\n"
                   "Options:\n"
                   "  -w, --wait      wait until each claim is gone\n"
                   "  -h, --help      show this help\n" CLI_GLOBAL_HELP);
        return c == 'h' ? 0 : 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "error: expected claim names: asb release CLAIM...\n");
        return 2;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    for (int i = optind; i < argc; i++) {
        const char *claim = argv[i];
        char *owner = NULL;
        int r = asb_object_delete(NULL, cl, "sandboxclaim", cli_namespace(), claim);
        if (r == ASB_ENOTFOUND && (owner = claim_of_sandbox(cl, argv[i]))) {
            claim = owner; /* a sandbox name: release the claim that holds it */
            r = asb_object_delete(NULL, cl, "sandboxclaim", cli_namespace(), claim);
        }
        if (r != ASB_OK) {
            ret |= cli_print_error(NULL);
            free(owner);
            continue;
        }
        if (wait) {
            asb_wait_options wo = ASB_WAIT_OPTIONS_INIT;
            wo.timeout_ms = 60000;
            if (asb_object_wait_deleted(cl, "sandboxclaim", cli_namespace(), claim, &wo) !=
                ASB_OK) {
                ret |= cli_print_error(claim);
                free(owner);
                continue;
            }
        }
        printf("sandboxclaim.extensions.agents.x-k8s.io \"%s\" released\n", claim);
        free(owner);
    }
    asb_client_free(cl);
    return ret;
}
