/* `asb ls NAME[:PATH]`: list a directory of a sandbox like `ls -l` (mode, size, modified time,
 * name; directories with a trailing /). A file path lists that one file. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void ls_usage(FILE *f)
{
    fprintf(f, "Usage: asb ls NAME[:PATH]\n\n"
               "List PATH (default: the sandbox's /workspace) in the sandbox NAME (or the sandbox\n"
               "of the claim NAME): mode, size, modification time (UTC), name.\n\n"
               "Options:\n"
               "  -h, --help      show this help\n" CLI_GLOBAL_HELP);
}

static void print_entry(const asb_sandbox_file_entry *e)
{
    char mode[11];
    static const char rwx[] = "rwxrwxrwx";
    mode[0] = e->type == ASB_SANDBOX_DIRECTORY ? 'd' : '-';
    for (int i = 0; i < 9; i++)
        mode[i + 1] = e->mode & (0400u >> i) ? rwx[i] : '-';
    mode[10] = '\0';
    char when[32] = "?";
    time_t t = (time_t)e->modified_at;
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
    printf("%s %10lld %s %s%s\n", mode, (long long)e->size, when, e->name,
           e->type == ASB_SANDBOX_DIRECTORY ? "/" : "");
}

int asb_ls(int argc, char **argv)
{
    int code = cli_parse_global_only(argc, argv, ls_usage);
    if (code >= 0)
        return code;
    if (argc - optind != 1 || !*argv[optind] || argv[optind][0] == ':') {
        fprintf(stderr, "error: expected one NAME[:PATH]\n");
        return main_usage_error(ls_usage);
    }
    _cleanup_free_ char *name = strdup(argv[optind]);
    if (!name)
        return 1;
    const char *path = "";
    char *colon = strchr(name, ':');
    if (colon) {
        *colon = '\0';
        path = colon + 1;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    asb_sandbox *s = NULL;
    ret = cli_sandbox_open(cl, name, &s);
    asb_client_free(cl);
    if (ret)
        return ret;
    char ctx[4200];
    snprintf(ctx, sizeof(ctx), "%s:%s", name, path);
    asb_sandbox_file_entry *e = NULL;
    size_t n = 0;
    int r = asb_sandbox_file_list(&e, &n, s, path);
    if (r == ASB_EBADREQUEST) {
        /* A file: list its parent and show its entry, as `ls -l FILE`. */
        _cleanup_free_ char *parent = strdup(path);
        if (!parent) {
            asb_sandbox_free(s);
            return 1;
        }
        size_t l = strlen(parent);
        while (l > 0 && parent[l - 1] == '/')
            parent[--l] = '\0';
        char *slash = strrchr(parent, '/');
        const char *base = slash ? slash + 1 : parent;
        if (slash)
            *slash = '\0';
        else
            parent[0] = '\0';
        _cleanup_free_ char *b = strdup(base);
        if (b && asb_sandbox_file_list(&e, &n, s, slash ? parent : "") == ASB_OK) {
            for (size_t i = 0; i < n; i++)
                if (strcmp(e[i].name, b) == 0) {
                    print_entry(&e[i]);
                    asb_sandbox_file_entries_free(e, n);
                    asb_sandbox_free(s);
                    return 0;
                }
            asb_sandbox_file_entries_free(e, n);
            e = NULL;
            n = 0;
        }
        r = ASB_EBADREQUEST;
    }
    if (r != ASB_OK) {
        ret = cli_print_sandbox_error(ctx);
    } else {
        for (size_t i = 0; i < n; i++)
            print_entry(&e[i]);
        asb_sandbox_file_entries_free(e, n);
    }
    asb_sandbox_free(s);
    return ret;
}
