/* geminicli-toolbox TOOL [JSON|@FILE|-]: runs one gemini-cli tool (spec/AGENT.md §2) and prints
 * {"llmContent", "returnDisplay", "error"} on stdout. Exit 0 whenever the tool ran (its errors
 * are in the JSON); 2 for usage errors, unknown tools and arguments that are not a JSON object.
 * See docs/agent-toolbox.md. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "shared/main-usage.h"
#include "toolbox/toolbox.h"

static void usage(FILE *f)
{
    fputs(
        "usage: geminicli-toolbox [--root DIR] TOOL [JSON | @FILE | -]\n"
        "Runs one gemini-cli tool with JSON arguments (from the argument, a file, or stdin\n"
        "when absent or '-') and prints {\"llmContent\",\"returnDisplay\",\"error\"} as one JSON\n"
        "line. The workspace is --root, else $GEMINICLI_TOOLBOX_ROOT, else the current\n"
        "directory. Tools: run_shell_command list_directory read_file write_file replace\n"
        "glob grep_search read_many_files. Exit status 0 when the tool ran (tool errors are\n"
        "in the JSON), 2 on usage errors.\n",
        f);
}

static int read_stream(FILE *in, char **ret)
{
    buf b = BUF_INIT;
    toolbox_buf_add(&b, "", 0);
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof(chunk), in)) > 0)
        toolbox_buf_add(&b, chunk, k);
    if (ferror(in)) {
        buf_done(&b);
        return -EIO;
    }
    *ret = toolbox_buf_steal(&b);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"root", required_argument, NULL, 'r'}, {"help", no_argument, NULL, 'h'}, {0}};
    const char *root_arg = getenv("GEMINICLI_TOOLBOX_ROOT");
    int c;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            root_arg = optarg;
            break;
        default:
            return main_usage_option(c, usage);
        }
    }
    if (optind >= argc || argc - optind > 2)
        return main_usage_error(usage);
    const char *tool = argv[optind];
    const char *src = argc - optind == 2 ? argv[optind + 1] : "-";
    if (!toolbox_find(tool)) {
        fprintf(stderr,
                "geminicli-toolbox: Tool \"%s\" not found in registry. Tools must use the exact "
                "names that are registered.\n",
                tool);
        return 2;
    }
    _cleanup_free_ char *root = realpath(root_arg && *root_arg ? root_arg : ".", NULL);
    if (!root) {
        fprintf(stderr, "geminicli-toolbox: workspace %s: %s\n", root_arg ? root_arg : ".",
                strerror(errno));
        return 2;
    }
    _cleanup_free_ char *text = NULL;
    int r = 0;
    if (strcmp(src, "-") == 0) {
        r = read_stream(stdin, &text);
    } else if (src[0] == '@') {
        FILE *f = fopen(src + 1, "re");
        if (!f) {
            fprintf(stderr, "geminicli-toolbox: %s: %s\n", src + 1, strerror(errno));
            return 2;
        }
        r = read_stream(f, &text);
        fclose(f);
    } else {
        text = strdup(src);
    }
    if (r < 0 || !text) {
        fprintf(stderr, "geminicli-toolbox: cannot read the arguments\n");
        return 2;
    }
    json_error_t jerr;
    json_t *args = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!args) {
        fprintf(stderr,
                "geminicli-toolbox: arguments are not valid JSON: %s (line %d, column %d)\n",
                jerr.text, jerr.line, jerr.column);
        return 2;
    }
    if (!json_is_object(args)) {
        fprintf(stderr, "geminicli-toolbox: arguments must be a JSON object\n");
        json_decref(args);
        return 2;
    }
    toolbox_ctx ctx = {.root = root};
    toolbox_result res = {0};
    r = toolbox_run(&ctx, tool, args, &res);
    json_decref(args);
    _cleanup_free_ char *out = r == 0 ? toolbox_result_to_json(&res) : NULL;
    toolbox_result_done(&res);
    if (!out) {
        fprintf(stderr, "geminicli-toolbox: %s failed: %s\n", tool, strerror(r < 0 ? -r : ENOMEM));
        return 1;
    }
    if (fputs(out, stdout) < 0 || fflush(stdout) != 0)
        return 1;
    return 0;
}
