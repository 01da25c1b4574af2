/* Shared plumbing of the client verbs: global flags, client creation, kubectl-style errors. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "cli/asb-cli.h"

cli_globals cli_global;
const char *cli_verb;

bool cli_global_option(int opt, const char *arg)
{
    switch (opt) {
    case CLI_OPT_SERVER:
        cli_global.server = arg;
        return true;
    case CLI_OPT_TOKEN:
        cli_global.token = arg;
        return true;
    case 'n':
        cli_global.ns = arg;
        cli_global.ns_given = true;
        return true;
    default:
        return false;
    }
}

const char *cli_namespace(void)
{
    return cli_global.ns && *cli_global.ns ? cli_global.ns : "default";
}

/* What libasb has to say to a person (it never writes to stderr itself): warnings, and notes such
 * as waiting for a server that is starting. Debug chatter stays quiet. */
static void cli_log(int level, const char *message, void *payload)
{
    if (level <= ASB_LOG_INFO)
        fprintf(stderr, "asb: %s\n", message);
}

/* Warnings the server sent (unknown fields, deprecations), printed as kubectl prints them. */
static void cli_warning(const char *text, void *payload)
{
    fprintf(stderr, "Warning: %s\n", text);
}

int cli_client(asb_client **ret)
{
    return cli_client_validating(ret, NULL);
}

int cli_client_validating(asb_client **ret, const char *field_validation)
{
    return cli_client_writing(ret, field_validation, false);
}

int cli_client_writing(asb_client **ret, const char *field_validation, bool dry_run)
{
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    o.dry_run = dry_run;
    o.log_cb = cli_log;
    o.warning_cb = cli_warning;
    o.field_validation = field_validation;
    o.server = cli_global.server;
    o.token = cli_global.token;
    if (asb_client_new(ret, &o) != ASB_OK)
        return cli_print_error(NULL);
    return 0;
}

int cli_print_error(const char *context)
{
    const asb_error *e = asb_error_last();
    const char *msg = e ? e->message : "unknown error";
    if (e && e->http_status && e->reason && *e->reason)
        fprintf(stderr, "Error from server (%s): %s%s%s\n", e->reason, context ? context : "",
                context ? ": " : "", msg);
    else
        fprintf(stderr, "error: %s%s%s\n", context ? context : "", context ? ": " : "", msg);
    return 1;
}

const asb_kind *cli_kind(const char *name)
{
    const asb_kind *k;
    if (asb_kind_lookup(&k, name) != ASB_OK) {
        fprintf(stderr, "error: the server doesn't have a resource type \"%s\"\n", name);
        return NULL;
    }
    return k;
}

const char *cli_ref(char *out, size_t size, const asb_kind *k, const char *name)
{
    snprintf(out, size, "%s.%s/%s", k->singular, k->group, name);
    return out;
}

int cli_read_file(const char *path, char **ret, size_t *ret_len)
{
    _cleanup_close_ int fd = -1;
    int in = STDIN_FILENO;
    if (strcmp(path, "-") != 0) {
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
            return -errno;
        in = fd;
    }
    _cleanup_buf_ buf text = BUF_INIT;
    int r = buf_append_fd(&text, in);
    if (r < 0)
        return r;
    size_t len = text.len;
    char *data = buf_steal(&text, NULL);
    if (!data)
        return -ENOMEM;
    *ret = data;
    *ret_len = len;
    return 0;
}

long long cli_parse_timeout(const char *s)
{
    char *end;
    errno = 0;
    long long secs = strtoll(s, &end, 10);
    if (*s && !*end && errno == 0 && secs >= 0)
        return secs * 1000;
    usec_t u;
    if (parse_go_duration(s, &u) < 0)
        return -EINVAL;
    return (long long)(u / USEC_PER_MSEC);
}

const char *cli_validate_arg(const char *s)
{
    if (!s || strcmp(s, "strict") == 0 || strcmp(s, "true") == 0)
        return "Strict";
    if (strcmp(s, "warn") == 0)
        return "Warn";
    if (strcmp(s, "ignore") == 0 || strcmp(s, "false") == 0)
        return "Ignore";
    fprintf(stderr,
            "error: invalid - validate option \"%s\"; must be one of: strict (or true), warn, "
            "ignore (or false)\n",
            s);
    return NULL;
}

bool cli_output_name_arg(const char *s)
{
    if (strcmp(s, "name") == 0)
        return true;
    fprintf(stderr,
            "error: unable to match a printer suitable for the output format \"%s\", allowed "
            "formats are: name\n",
            s);
    return false;
}

long long cli_positive_duration_arg(const char *s)
{
    long long ms = cli_parse_timeout(s);
    if (ms > 0)
        return ms;
    fprintf(stderr, "error: invalid duration \"%s\" (use 30s, 5m, 1h or seconds)\n", s);
    return -EINVAL;
}

const char *cli_meta(const json_t *obj, const char *field)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), field));
}

int cli_parse_global_only(int argc, char **argv, void (*usage)(FILE *))
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, CLI_GLOBAL_LONG, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        return cli_usage_option(c, argv, usage);
    }
    return -1;
}

/* The short options of asb's verbs that take an argument: an unknown letter and a letter missing
 * its argument look the same to getopt when they end the command line. */
#define CLI_SHORT_WITH_ARGUMENT "cflnop"

int cli_usage_option(int opt, char **argv, main_usage_fn *usage)
{
    if (opt == 'h') {
        usage(stdout);
        return 0;
    }
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    size_t name_len = strcspn(arg, "=");
    const char *sub = argv[0] && cli_verb && strcmp(argv[0], cli_verb) != 0 ? argv[0] : NULL;
    bool last = argv[optind] == NULL; /* only the last word can lack its argument */
    if (optopt == 0)                  /* glibc: an unrecognized long option */
        fprintf(stderr, "error: unknown flag: %.*s\n", (int)name_len, arg);
    else if (strncmp(arg, "--", 2) == 0 && last)
        fprintf(stderr, "error: flag needs an argument: %.*s\n", (int)name_len, arg);
    else if (optopt > 0 && optopt < 128 && arg[0] == '-' && arg[1] == optopt && !arg[2] && last &&
             strchr(CLI_SHORT_WITH_ARGUMENT, optopt))
        fprintf(stderr, "error: flag needs an argument: '%c' in %s\n", optopt, arg);
    else
        fprintf(stderr, "error: unknown shorthand flag: '%c' in -%c\n",
                optopt > 0 && optopt < 128 ? optopt : '?',
                optopt > 0 && optopt < 128 ? optopt : '?');
    fprintf(stderr, "See 'asb %s%s%s --help' for usage.\n", cli_verb ? cli_verb : argv[0],
            sub ? " " : "", sub ? sub : "");
    return 1;
}
