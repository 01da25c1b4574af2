/* `asb VERB ...`: dispatch to one file per verb (crun/kubectl style). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static const struct verb {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} verbs[] = {
    {"serve", asb_serve_exec, "Run the local control plane (Kubernetes-shaped API server)"},
    {"apply", asb_apply, "Create or update objects from YAML or JSON manifests"},
    {"get", asb_get, "Show objects (table, -o json|yaml|wide|name)"},
    {"describe", asb_describe, "Show one object in detail, with its conditions and events"},
    {"delete", asb_delete, "Delete objects"},
    {"wait", asb_wait, "Wait for a condition on an object (or its deletion)"},
    {"claim", asb_claim_main, "Claim a sandbox from a warm pool (prints the sandbox name)"},
    {"release", asb_release, "Release (delete) sandbox claims"},
    {"snapshot", asb_snapshot_main, "Snapshot a sandbox's files (create), list (ls), delete (rm)"},
    {"fork", asb_fork_main, "Snapshot a sandbox and start copies of it (prints their names)"},
    {"extend", asb_extend, "Move the shutdown time of a claim or sandbox to now + DURATION"},
    {"exec", asb_exec, "Run a command in a sandbox (-i stdin, -t terminal)"},
    {"cp", asb_cp, "Copy a file into or out of a sandbox (NAME:PATH)"},
    {"ls", asb_ls, "List a directory of a sandbox (NAME[:PATH])"},
    {"suspend", asb_suspend, "Suspend a sandbox (spec.operatingMode: Suspended)"},
    {"resume", asb_resume, "Resume a suspended sandbox (spec.operatingMode: Running)"},
    {"logs", asb_logs, "Print the main process output of a sandbox"},
    {"top", asb_top, "Show the CPU and memory running sandboxes use"},
    {"preview", asb_preview, "Print a browser URL for a port of a sandbox (signed link)"},
    {"port-forward", asb_port_forward, "Forward local ports to ports inside a sandbox"},
    {"mcp", asb_mcp, "Serve the Model Context Protocol (stdio, or HTTP with --listen)"},
    {"version", asb_version_main, "Print the client and server versions"},
    {"completion", asb_completion, "Print a shell completion script (bash or zsh)"},
    {"create", asb_create, "Create objects from manifests (an existing one is an error)"},
    {"replace", asb_replace, "Replace objects whole from manifests (PUT)"},
    {"label", asb_label, "Set (KEY=VALUE) or remove (KEY-) labels of objects"},
    {"annotate", asb_annotate, "Set (KEY=VALUE) or remove (KEY-) annotations of objects"},
    {"patch", asb_patch, "Patch objects (--type merge|json|strategic)"},
    {"edit", asb_edit, "Edit an object in $KUBE_EDITOR / $EDITOR and save it"},
    {"scale", asb_scale, "Set a warm pool's replicas through its scale subresource"},
    {"api-resources", asb_api_resources, "Print the kinds the server serves"},
    {"explain", asb_explain,
     "Describe the fields of a kind, from the schema the server validates with"},
};

const char *asb_verb_name(size_t i)
{
    return i < ELEMENTSOF(verbs) ? verbs[i].name : NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: asb COMMAND [OPTIONS]\n\nAgent Sandbox command line.\n\nCommands:\n");
    for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
        fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
    fprintf(f, "\n" CLI_GLOBAL_HELP);
    fprintf(f, "\nRun 'asb COMMAND --help' for more information on a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return main_usage_error(usage);
    /* Global flags may come before the verb: `asb --server URL -n NS get sbx`. */
    while (argc >= 3 && (strcmp(argv[1], "--server") == 0 || strcmp(argv[1], "--token") == 0 ||
                         strcmp(argv[1], "-n") == 0 || strcmp(argv[1], "--namespace") == 0)) {
        int opt = argv[1][2] == 's' ? CLI_OPT_SERVER : argv[1][2] == 't' ? CLI_OPT_TOKEN : 'n';
        cli_global_option(opt, argv[2]);
        argv[2] = argv[0];
        argc -= 2;
        argv += 2;
    }
    if (argc < 2)
        return main_usage_error(usage);
    const char *v = argv[1];
    if (strcmp(v, "--help") == 0 || strcmp(v, "-h") == 0 || strcmp(v, "help") == 0) {
        usage(stdout);
        return 0;
    }
    opterr = 0; /* bad options are reported by cli_usage_option(), in kubectl's words */
    cli_verb = v;
    for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
        if (strcmp(v, verbs[i].name) == 0)
            return verbs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "asb: unknown command \"%s\"\nRun 'asb --help' for usage.\n", v);
    return 2;
}
