/* geminicli-toolbox argument path: input is "TOOL\nJSON". The JSON is parsed as the binary
 * parses it and handed to the tool, which validates it and runs on a small temp workspace
 * (run_shell_command is validated only: its command is never run). Invariants: the result
 * serializes to valid JSON with the three fields, and nothing is written outside the workspace. */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local/fs/local-fs.h"
#include "toolbox/toolbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *root, *outside, *top;

/* The temp workspace goes away with the process (corpus replays in `make test` too). */
static void cleanup(void)
{
    if (top)
        fs_rm_rf(top);
}

static void put(const char *dir, const char *name, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "we");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    char tmpl[] = "/tmp/fuzz-toolbox-args-XXXXXX";
    char *d = mkdtemp(tmpl);
    char p[PATH_MAX];
    if (!d || !(top = strdup(d)))
        abort();
    atexit(cleanup);
    snprintf(p, sizeof(p), "%s/ws", d);
    mkdir(p, 0755);
    root = realpath(p, NULL);
    snprintf(p, sizeof(p), "%s/outside", d);
    mkdir(p, 0755);
    outside = realpath(p, NULL);
    if (!root || !outside)
        abort();
    put(root, "a.txt", "alpha\nbeta\ngamma\n");
    put(root, ".gitignore", "*.log\n!keep.log\nbuild/\n/x/*.o\n");
    snprintf(p, sizeof(p), "%s/.git", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/sub", root);
    mkdir(p, 0755);
    put(p, "b.c", "int main(void) { return 0; }\n");
    put(outside, "secret", "secret\n");
    snprintf(p, sizeof(p), "%s/up", root);
    if (symlink(outside, p) < 0)
        abort();
}

static int count_outside(void)
{
    DIR *d = opendir(outside);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n++;
    closedir(d);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int before = -1;
    if (!root) {
        setup();
        before = count_outside();
    }
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl || nl - data > 64)
        return 0;
    char tool[65];
    memcpy(tool, data, (size_t)(nl - data));
    tool[nl - data] = '\0';
    json_t *args = json_loadb((const char *)nl + 1, size - (size_t)(nl - data) - 1,
                              JSON_REJECT_DUPLICATES, NULL);
    if (!args)
        return 0;
    if (strcmp(tool, "run_shell_command") == 0) {
        /* validation only */
        const char *cmd, *dir;
        toolbox_result res = {0};
        bool bg, has;
        long long delay;
        if (json_is_object(args) && toolbox_arg_string(args, "command", true, &cmd, &res) == 0 &&
            toolbox_arg_string(args, "dir_path", false, &dir, &res) == 0 &&
            toolbox_arg_bool(args, "is_background", false, &bg, &res) == 0 &&
            toolbox_arg_int(args, "delay_ms", 0, &delay, &has, &res) == 0 && dir) {
            toolbox_ctx ctx = {.root = root};
            bool inside;
            free(toolbox_resolve(&ctx, dir, &inside));
        }
        toolbox_result_done(&res);
        json_decref(args);
        return 0;
    }
    toolbox_ctx ctx = {.root = root};
    toolbox_result res = {0};
    int r = toolbox_run(&ctx, tool, args, &res);
    json_decref(args);
    if (r == 0) {
        char *out = toolbox_result_to_json(&res);
        if (!out)
            abort();
        json_t *back = json_loads(out, 0, NULL);
        if (!back || !json_is_string(json_object_get(back, "llmContent")) ||
            !json_is_string(json_object_get(back, "returnDisplay")) ||
            !json_object_get(back, "error"))
            abort();
        json_decref(back);
        free(out);
    }
    toolbox_result_done(&res);
    if (count_outside() != before)
        abort(); /* something was written outside the workspace */
    return 0;
}
