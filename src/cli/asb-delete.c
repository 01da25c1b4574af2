/* `asb delete KIND NAME... | KIND/NAME | -f FILE | KIND --all | KIND -l SEL`: delete objects, printing
 * `KIND.GROUP "NAME" deleted` as kubectl does, then (unless --wait=false) wait until they are
 * gone: a Sandbox stays, with a deletionTimestamp, until its teardown on the host finished. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/time-util.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void delete_usage(FILE *f)
{
    fprintf(f, "Usage: asb delete KIND NAME... | KIND/NAME... | -f FILE | KIND --all | KIND -l SEL\n\n"
               "Options:\n"
               "  -f, --filename FILE      delete the objects of a manifest (- for stdin)\n"
               "      --all                delete every object of KIND in the namespace (KIND\n"
               "                           all: every claim, pool, template, sandbox and\n"
               "                           snapshot, in an order that converges)\n"
               "  -l, --selector SEL       delete the objects of KIND with these labels\n"
               "      --ignore-not-found   a missing object is not an error\n"
               "      --wait=false         return once deletion started (default: wait until\n"
               "                           the objects are gone, at most 120 s)\n"
               "  -h, --help               show this help\n" CLI_GLOBAL_HELP);
}

/* Objects whose deletion was asked: waited for at the end, so that several tear down at once. */
typedef struct deleted {
    const asb_kind *k;
    char *ns, *name;
} deleted;
static deleted *pending;
static size_t n_pending;

static int delete_one(asb_client *cl, const asb_kind *k, const char *ns, const char *name,
                      bool ignore_not_found)
{
    int r = asb_object_delete(NULL, cl, k->plural, ns, name);
    if (r == ASB_ENOTFOUND && ignore_not_found)
        return 0;
    if (r != ASB_OK)
        return cli_print_error(NULL);
    printf("%s.%s \"%s\" deleted\n", k->singular, k->group, name);
    fflush(stdout);
    deleted *v = realloc(pending, (n_pending + 1) * sizeof(*v));
    if (v) {
        pending = v;
        v[n_pending] = (deleted){k, strdup(ns), strdup(name)};
        if (v[n_pending].ns && v[n_pending].name)
            n_pending++;
        else {
            free(v[n_pending].ns);
            free(v[n_pending].name);
        }
    }
    return 0;
}

/* Until every deleted object is gone (404), as kubectl delete --wait. */
static int wait_deleted(asb_client *cl)
{
    usec_t t0 = now_usec(CLOCK_MONOTONIC);
    int ret = 0;
    for (size_t i = 0; i < n_pending; i++) {
        deleted *d = &pending[i];
        for (;;) {
            int r = asb_object_get(NULL, cl, d->k->plural, d->ns, d->name);
            if (r == ASB_ENOTFOUND)
                break;
            if (r != ASB_OK) {
                ret |= cli_print_error(NULL);
                break;
            }
            if (now_usec(CLOCK_MONOTONIC) - t0 >= 120 * USEC_PER_SEC) {
                fprintf(stderr, "error: timed out waiting for %s \"%s\" to be gone\n",
                        d->k->singular, d->name);
                ret = 1;
                break;
            }
            usleep(20000);
        }
    }
    return ret;
}

/* --all / -l: every object of k in the namespace the selector (NULL: all) matches; *found
 * (may be NULL) is set when there was one. */
static int delete_listed(asb_client *cl, const asb_kind *k, const char *selector, bool *found)
{
    asb_list_options lo = ASB_LIST_OPTIONS_INIT;
    lo.label_selector = selector;
    _cleanup_free_ char *s = NULL;
    if (asb_object_list(&s, cl, k->plural, cli_namespace(), &lo) != ASB_OK)
        return cli_print_error(NULL);
    json_t *list = json_loads(s, 0, NULL);
    json_t *items = json_object_get(list, "items");
    int ret = 0;
    if (json_array_size(items) == 0 && !found)
        fprintf(stderr, "No resources found\n");
    if (found && json_array_size(items) > 0)
        *found = true;
    size_t i;
    json_t *o;
    json_array_foreach (items, i, o)
        ret |= delete_one(cl, k, cli_namespace(), cli_meta(o, "name"), true);
    json_decref(list);
    return ret;
}

/* kubectl's `all` category for our kinds, in an order that converges: claims before the pools
 * (a pool gone first would let a waiting claim start a cold sandbox), pools before their
 * templates and before the sandboxes (a member deleted first is refilled), snapshots last (a
 * template or an unstarted fork that names one keeps it). */
static const char *const all_kinds[] = {"sandboxclaims", "sandboxwarmpools", "sandboxtemplates",
                                        "sandboxes", "sandboxsnapshots"};

static int delete_all(asb_client *cl, const char *selector)
{
    int ret = 0;
    bool found = false;
    for (size_t i = 0; i < ELEMENTSOF(all_kinds); i++) {
        const asb_kind *k;
        if (asb_kind_lookup(&k, all_kinds[i]) == ASB_OK)
            ret |= delete_listed(cl, k, selector, &found);
    }
    if (!found)
        fprintf(stderr, "No resources found\n");
    return ret;
}

static int delete_file(asb_client *cl, const char *file, bool ignore_not_found)
{
    _cleanup_free_ char *data = NULL, *arr = NULL;
    size_t len;
    int r = cli_read_file(file, &data, &len);
    if (r < 0) {
        fprintf(stderr, "error: the path \"%s\" cannot be read: %s\n", file, strerror(-r));
        return 1;
    }
    if (asb_manifest_parse(&arr, data, len) != ASB_OK) {
        fprintf(stderr, "error: error parsing %s: %s\n", file, asb_error_last()->message);
        return 1;
    }
    json_t *docs = json_loads(arr, 0, NULL);
    int ret = 0;
    for (size_t i = 0; i < json_array_size(docs); i++) {
        json_t *o = json_array_get(docs, i);
        const asb_kind *k;
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *name = cli_meta(o, "name"), *ns = cli_meta(o, "namespace");
        if (!kind || asb_kind_lookup(&k, kind) != ASB_OK || !name) {
            fprintf(stderr, "error: %s: object %zu has no known kind or no name\n", file, i + 1);
            ret = 1;
            continue;
        }
        ret |= delete_one(cl, k, ns && *ns ? ns : cli_namespace(), name, ignore_not_found);
    }
    json_decref(docs);
    return ret;
}

/* What the command line asks. */
typedef struct delete_args {
    const char *file, *selector;
    bool ignore, wait, all, every;
    const asb_kind *k; /* the KIND of `asb delete KIND NAME...` or of --all/-l; NULL: KIND/NAME */
} delete_args;

/* Options into a; -1 when the command goes on, else the exit code after saying why not. */
static int delete_parse(int argc, char **argv, delete_args *a)
{
    static const struct option opts[] = {{"filename", required_argument, NULL, 'f'},
                                         {"ignore-not-found", no_argument, NULL, 'I'},
                                         {"wait", optional_argument, NULL, 'W'},
                                         {"all", no_argument, NULL, 'a'},
                                         {"selector", required_argument, NULL, 'l'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    int c;
    while ((c = getopt_long(argc, argv, "f:l:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        switch (c) {
        case 'f':
            a->file = optarg;
            break;
        case 'I':
            a->ignore = true;
            break;
        case 'a':
            a->all = true;
            break;
        case 'l':
            a->selector = optarg;
            break;
        case 'W':
            if (optarg && strcmp(optarg, "false") != 0 && strcmp(optarg, "true") != 0) {
                fprintf(stderr, "error: --wait wants true or false, got \"%s\"\n", optarg);
                return 2;
            }
            a->wait = !optarg || strcmp(optarg, "true") == 0;
            break;
        default:
            return cli_usage_option(c, argv, delete_usage);
        }
    }
    if (!a->file && optind >= argc) {
        fprintf(stderr, "error: you must provide one or more resources by argument or filename\n");
        return main_usage_error(delete_usage);
    }
    return -1;
}

/* Checks the KIND / NAME / KIND/NAME arguments before anything is deleted; leaves optind at the
 * first name. -1 when they are good, else the exit code after saying why not. */
static int delete_check_targets(int argc, char **argv, delete_args *a)
{
    if (a->all || a->selector) {
        if (a->file || optind + 1 != argc || strchr(argv[optind], '/')) {
            fprintf(stderr, "error: --all and --selector take one KIND and no names\n");
            return 2;
        }
        a->every = strcmp(argv[optind], "all") == 0;
        if (!a->every && !(a->k = cli_kind(argv[optind])))
            return 2;
        optind = argc; /* no names below */
    } else if (!a->file && !strchr(argv[optind], '/')) {
        if (!(a->k = cli_kind(argv[optind])))
            return 2;
        if (optind + 1 >= argc) {
            fprintf(stderr, "error: resource(s) were provided, but no name was specified\n");
            return 2;
        }
        optind++;
    } else {
        for (int i = optind; i < argc; i++) {
            _cleanup_free_ char *kn = strdup(argv[i]);
            char *s = kn ? strchr(kn, '/') : NULL;
            if (!s || !s[1]) {
                fprintf(stderr, "error: there is no need to specify a resource type as a separate "
                                "argument when passing arguments in resource/name form\n");
                return 2;
            }
            *s = '\0';
            if (!cli_kind(kn))
                return 2;
        }
    }
    return -1;
}

static void forget_pending(void)
{
    for (size_t i = 0; i < n_pending; i++) {
        free(pending[i].ns);
        free(pending[i].name);
    }
    free(pending);
    pending = NULL;
    n_pending = 0;
}

int asb_delete(int argc, char **argv)
{
    delete_args a = {.wait = true};
    int ret = delete_parse(argc, argv, &a);
    if (ret < 0)
        ret = delete_check_targets(argc, argv, &a);
    if (ret >= 0)
        return ret;
    asb_client *cl = NULL;
    ret = cli_client(&cl);
    if (ret)
        return ret;
    if (a.file)
        ret |= delete_file(cl, a.file, a.ignore);
    if (a.every)
        ret |= delete_all(cl, a.selector);
    else if (a.all || a.selector)
        ret |= delete_listed(cl, a.k, a.selector, NULL);
    for (int i = optind; i < argc; i++) {
        if (a.k) {
            ret |= delete_one(cl, a.k, cli_namespace(), argv[i], a.ignore);
            continue;
        }
        _cleanup_free_ char *kn = strdup(argv[i]);
        if (!kn) {
            ret = 1;
            break;
        }
        char *s = strchr(kn, '/');
        *s = '\0';
        ret |= delete_one(cl, cli_kind(kn), cli_namespace(), s + 1, a.ignore);
    }
    if (a.wait)
        ret |= wait_deleted(cl);
    forget_pending();
    asb_client_free(cl);
    return ret;
}
