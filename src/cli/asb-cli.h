/* Helpers shared by the client verbs of `asb` (apply, get, delete, wait). Built on libasb only. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "asb/asb.h"
#include "shared/main-usage.h"

/* Flags every client verb accepts (also before the verb: `asb --server URL get sbx`). */
typedef struct cli_globals {
    const char *server;
    const char *token;
    const char *ns; /* NULL: "default" */
    bool ns_given;
} cli_globals;

extern cli_globals cli_global;

/* getopt_long entries for --server, --token, -n/--namespace; CLI_GLOBAL_SHORT goes into the short
 * option string. cli_global_option() consumes one of them (returns true) or returns false. */
#define CLI_OPT_SERVER 0x1001
#define CLI_OPT_TOKEN 0x1002
#define CLI_GLOBAL_LONG                                                                            \
    {"server", required_argument, NULL, CLI_OPT_SERVER},                                           \
        {"token", required_argument, NULL, CLI_OPT_TOKEN},                                         \
    {                                                                                              \
        "namespace", required_argument, NULL, 'n'                                                  \
    }
#define CLI_GLOBAL_SHORT "n:"
bool cli_global_option(int opt, const char *arg);
/* Parses a verb that takes only -h/--help and the global options. Returns -1 to go on (optind at
 * the first operand), or the exit code: 0 after printing usage(stdout) for -h, 2 after
 * usage(stderr) for anything unknown. */
int cli_parse_global_only(int argc, char **argv, void (*usage)(FILE *));
#define CLI_GLOBAL_HELP                                                                            \
    "Global options:\n"                                                                            \
    "  --server URL          API server (default $ASB_SERVER, then $ASB_STATE_DIR/server)\n"       \
    "  --token TOKEN         bearer token (default $ASB_TOKEN, then $ASB_STATE_DIR/token)\n"       \
    "  -n, --namespace NS    namespace (default \"default\")\n"

const char *cli_namespace(void);

/* Creates the client from the global flags, printing the error. Returns 0 or exit code 1. */
int cli_client(asb_client **ret);
/* The same, sending fieldValidation (Strict, Warn, Ignore; NULL: the server's default) on
 * writes. */
int cli_client_validating(asb_client **ret, const char *field_validation);
/* The same, and with dry_run every write carries dryRun=All (kubectl's --dry-run=server). */
int cli_client_writing(asb_client **ret, const char *field_validation, bool dry_run);

/* Prints the last libasb error as kubectl does: `Error from server (Reason): message` for server
 * replies, `error: [context: ]message` otherwise. Returns 1 (the exit code). */
int cli_print_error(const char *context);

/* Resolves a kind typed by the user; prints `error: the server doesn't have a resource type "x"`
 * and returns NULL when unknown. */
const asb_kind *cli_kind(const char *name);

/* "sandbox.agents.x-k8s.io/NAME" into buf. */
const char *cli_ref(char *buf, size_t size, const asb_kind *k, const char *name);

/* Reads a whole file ("-" = stdin). Returns 0 or -errno. *ret is NUL-terminated, owned. */
int cli_read_file(const char *path, char **ret, size_t *ret_len);

/* Go-style duration ("30s", "1m", "500ms") or plain seconds into milliseconds; -EINVAL if
 * invalid. */
long long cli_parse_timeout(const char *s);
/* cli_parse_timeout() of an option's value that must be above zero: the milliseconds, or -EINVAL
 * after telling stderr what is wrong with it. */
long long cli_positive_duration_arg(const char *s);
/* kubectl's --validate value (NULL: the bare flag, strict) as the server's fieldValidation
 * ("Strict", "Warn", "Ignore"); NULL after telling stderr the value is none of them. */
const char *cli_validate_arg(const char *s);
/* -o of the verbs that only print names: true for "name", else false after telling stderr. */
bool cli_output_name_arg(const char *s);

/* Helpers on objects. */
const char *cli_meta(const json_t *obj, const char *field);

/* Sandbox verbs (exec, cp, ls, suspend, resume, logs): NAME is a Sandbox, or else a SandboxClaim
 * whose status.sandbox.name names the sandbox. On success *ret_name is the Sandbox's name and
 * *ret_obj (may be NULL) the Sandbox object as JSON, both owned. Prints the error and returns 1. */
int cli_sandbox_resolve(asb_client *cl, const char *name, char **ret_name, json_t **ret_obj);

/* Resolves NAME and opens the sandbox client on it; the sandbox must be Ready. Prints the error
 * (unknown sandbox, not ready with the condition's reason and message, ...) and returns 1. */
int cli_sandbox_open(asb_client *cl, const char *name, asb_sandbox **ret);

/* kubectl top's cell of a PodMetrics (asb_sandbox_usage()): what "cpu" as millicores ("12m"),
 * "memory" as MiB ("34Mi"). Owned. */
char *cli_usage_cell(const json_t *pod_metrics, const char *what);

/* Prints a sandbox-client error (`error: [context: ]message`); returns 1. */
int cli_print_sandbox_error(const char *context);

/* The verb being run ("get"), set by main before dispatching: named in `See 'asb VERB --help'`. */
extern const char *cli_verb;

/* For the `default:` of a verb's getopt_long loop (opterr is 0 in asb): 'h' prints usage(stdout)
 * and returns 0; a bad option prints kubectl's one line (`error: unknown flag: --foo`, `unknown
 * shorthand flag: 'x' in -x`, `flag needs an argument: --selector`) and `See 'asb VERB --help'
 * for usage.` on stderr and returns 1, as kubectl does. argv is the verb's (argv[0] names a
 * sub-verb when it is not cli_verb); usage may be NULL when opt is not 'h'. */
int cli_usage_option(int opt, char **argv, main_usage_fn *usage);
