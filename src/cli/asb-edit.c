/* `asb edit KIND NAME|KIND/NAME [-o yaml|json]`: the object in $KUBE_EDITOR, else $EDITOR, else vi;
 * what changed is sent as one merge patch. As kubectl edit: a save the server refuses (or that does
 * not parse) re-opens the file with the error as comments at the top; saving it again unchanged
 * gives up and keeps the file; an unchanged or empty file changes nothing. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-targets.h"
#include "cli/asb.h"

static void edit_usage(FILE *f)
{
    fprintf(f, "Usage: asb edit KIND NAME|KIND/NAME [-o yaml|json]\n\n"
               "Opens the object in $KUBE_EDITOR, else $EDITOR, else vi, and saves what changed.\n"
               "A save the server refuses re-opens the file with the error at the top.\n\n"
               "Options:\n"
               "  -o, --output FORMAT   yaml (default) or json\n"
               "  -h, --help            show this help\n" CLI_GLOBAL_HELP);
}

#define EDIT_HEADER                                                                                \
    "# Please edit the object below. Lines beginning with a '#' will be ignored,\n"                \
    "# and an empty file will abort the edit. If an error occurs while saving this file will be\n" \
    "# reopened with the relevant failures.\n"                                                     \
    "#\n"

/* text without its lines that begin with '#' (owned). */
static char *strip_comments(const char *text)
{
    _cleanup_buf_ buf b = BUF_INIT;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
        if (*p != '#' && buf_append(&b, p, len) < 0)
            return NULL;
        p += len;
    }
    return buf_steal(&b, NULL);
}

/* RFC 7386 merge patch that turns `from` into `to` (new reference). */
static json_t *merge_diff(const json_t *from, const json_t *to)
{
    json_t *patch = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)from, k, v)
        if (!json_object_get(to, k))
            json_object_set_new(patch, k, json_null());
    json_object_foreach ((json_t *)to, k, v) {
        json_t *old = json_object_get(from, k);
        if (old && json_equal(old, v))
            continue;
        if (json_is_object(old) && json_is_object(v))
            json_object_set_new(patch, k, merge_diff(old, v));
        else
            json_object_set(patch, k, v);
    }
    return patch;
}

/* Runs the editor on path; 0, or 1 after saying what went wrong. */
static int run_editor(const char *path)
{
    const char *ed = getenv("KUBE_EDITOR");
    if (!ed || !*ed)
        ed = getenv("EDITOR");
    if (!ed || !*ed)
        ed = "vi";
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "error: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        /* "vim -f" and the like: the shell splits the editor's words, the file stays one */
        if (strpbrk(ed, " \t"))
            execl("/bin/sh", "sh", "-c", "eval \"$0\" '\"$1\"'", ed, path, (char *)NULL);
        else
            execlp(ed, ed, path, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "error: there was a problem with the editor \"%s\"\n", ed);
        return 1;
    }
    return 0;
}

static int write_file(const char *path, const char *text)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
    size_t len = strlen(text);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
        fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

/* The object as the file shows it (owned). */
static char *render(const json_t *obj, bool json)
{
    _cleanup_free_ char *s = json_dumps(obj, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
    if (!s || json)
        return s ? strdup_printf("%s\n", s) : NULL;
    char *y = NULL;
    if (asb_manifest_to_yaml(&y, s) != ASB_OK)
        return NULL;
    char *r = strdup(y);
    asb_free(y);
    return r;
}

typedef struct edit_state {
    asb_client *cl;
    const cli_target *t;
    const char *path;
    json_t *original;
    char ref[600];
} edit_state;

/* Parses the saved text into one object. NULL with *ret_why (owned) set when it does not parse. */
static json_t *parse_saved(const char *text, char **ret_why)
{
    _cleanup_free_ char *arr = NULL;
    if (asb_manifest_parse(&arr, text, strlen(text)) != ASB_OK) {
        *ret_why =
            strdup_printf("The edited file had a syntax error: %s", asb_error_last()->message);
        return NULL;
    }
    json_t *docs = json_loads(arr, 0, NULL);
    json_t *obj = json_array_size(docs) == 1 ? json_incref(json_array_get(docs, 0)) : NULL;
    if (!obj)
        *ret_why = strdup("The edited file must hold exactly one object");
    json_decref(docs);
    return obj;
}

static bool same_identity(const json_t *a, const json_t *b)
{
    static const char *const top[] = {"apiVersion", "kind"};
    for (size_t i = 0; i < ELEMENTSOF(top); i++)
        if (!json_equal(json_object_get(a, top[i]), json_object_get(b, top[i])))
            return false;
    return json_equal(json_object_get(json_object_get(a, "metadata"), "name"),
                      json_object_get(json_object_get(b, "metadata"), "name"));
}

/* text with "# " after each line break, so that a message of several lines stays a comment
 * (owned). */
static char *commented(const char *text)
{
    _cleanup_buf_ buf b = BUF_INIT;
    for (const char *p = text; *p; p++)
        if ((*p == '\n' ? buf_append_str(&b, "\n# ") : buf_append_byte(&b, *p)) < 0)
            return NULL;
    return buf_steal(&b, NULL);
}

static int kept(const edit_state *st, bool *ret_keep, const char *why)
{
    *ret_keep = true;
    fprintf(stderr, "A copy of your changes has been stored to \"%s\"\n", st->path);
    fprintf(stderr, "error: %s\n", why);
    return 1;
}

/* The edit loop. Returns the exit code; *ret_keep says whether the file stays. */
static int edit_loop(edit_state *st, bool json, bool *ret_keep)
{
    _cleanup_free_ char *shown = render(st->original, json);
    _cleanup_free_ char *original_text = shown ? strip_comments(shown) : NULL;
    _cleanup_free_ char *header = NULL, *previous = NULL; /* previous: a refused save, stripped */
    if (!original_text)
        return 1;
    *ret_keep = false; /* kept only where the user is told where it is */
    for (;;) {
        _cleanup_free_ char *text =
            strdup_printf("%s%s%s", EDIT_HEADER, header ? header : "", previous ? previous : shown);
        if (!text || write_file(st->path, text) || run_editor(st->path))
            return 1;
        _cleanup_free_ char *saved = NULL, *why = NULL;
        size_t len;
        int r = cli_read_file(st->path, &saved, &len);
        if (r < 0) {
            fprintf(stderr, "error: cannot read %s: %s\n", st->path, strerror(-r));
            return 1;
        }
        _cleanup_free_ char *stripped = strip_comments(saved);
        if (!stripped)
            return 1;
        if (previous && strcmp(stripped, previous) == 0)
            return kept(st, ret_keep, "Edit cancelled, no valid changes were saved.");
        if (strspn(stripped, " \t\r\n") == strlen(stripped)) {
            fprintf(stderr, "Edit cancelled, saved file was empty.\n");
            return 0;
        }
        json_t *edited = parse_saved(stripped, &why);
        bool parsed = edited != NULL;
        if (edited && strcmp(stripped, original_text) == 0) {
            json_decref(edited);
            fprintf(stderr, "Edit cancelled, no changes made.\n");
            return 0;
        }
        if (edited && !same_identity(st->original, edited)) {
            json_decref(edited);
            return kept(st, ret_keep, "At least one of apiVersion, kind and name was changed");
        }
        if (edited) {
            json_t *patch = merge_diff(st->original, edited);
            _cleanup_free_ char *ps = patch ? json_dumps(patch, JSON_COMPACT) : NULL;
            json_decref(patch);
            json_decref(edited);
            r = ps ? asb_object_patch(NULL, st->cl, st->t->kind->plural, cli_namespace(),
                                      st->t->name, ps, 0)
                   : ASB_ENOMEM;
            if (r == ASB_OK) {
                printf("%s edited\n", st->ref);
                return 0;
            }
            if (r == ASB_ENOTFOUND) {
                *ret_keep = true;
                fprintf(stderr,
                        "The edits you made on deleted resources have been saved to "
                        "\"%s\"\n",
                        st->path);
                return 1;
            }
            if (r != ASB_EINVALID && r != ASB_EBADREQUEST) {
                cli_print_error(NULL);
                *ret_keep = true;
                fprintf(stderr, "You can run `asb replace -f %s` to try this update again.\n",
                        st->path);
                return 1;
            }
            why = strdup(asb_error_last()->message);
            fprintf(stderr, "error: %s.%s \"%s\" is invalid\n", st->t->kind->plural,
                    st->t->kind->group, st->t->name);
        }
        /* Re-open with the reason at the top and the user's text below it (kubectl's header: a
         * refusal under `NAME was not valid:`, a syntax error on its own). */
        free(header);
        _cleanup_free_ char *reason = commented(why ? why : "unknown error");
        header = !reason ? NULL
                 : parsed
                     ? strdup_printf("# %s.%s \"%s\" was not valid:\n# * %s\n#\n",
                                     st->t->kind->plural, st->t->kind->group, st->t->name, reason)
                     : strdup_printf("# %s\n#\n", reason);
        free(previous);
        previous = TAKE_PTR(stripped);
        if (!header || !previous)
            return 1;
    }
}

int asb_edit(int argc, char **argv)
{
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    bool json = false;
    int c;
    while ((c = getopt_long(argc, argv, "o:h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c == 'o' && (strcmp(optarg, "json") == 0 || strcmp(optarg, "yaml") == 0)) {
            json = strcmp(optarg, "json") == 0;
            continue;
        }
        if (c == 'o') {
            fprintf(stderr, "error: the edit mode doesn't support output the format \"%s\"\n",
                    optarg);
            return 1;
        }
        return cli_usage_option(c, argv, edit_usage);
    }
    cli_targets t;
    if (cli_targets_parse(&t, argv + optind, (size_t)(argc - optind), false, NULL))
        return 1;
    if (t.n != 1) {
        fprintf(stderr, "error: asb edit takes one object\n");
        cli_targets_done(&t);
        return 1;
    }
    edit_state st = {.t = &t.v[0]};
    cli_ref(st.ref, sizeof(st.ref), st.t->kind, st.t->name);
    int ret = cli_client(&st.cl);
    _cleanup_free_ char *text = NULL;
    if (ret == 0 &&
        asb_object_get(&text, st.cl, st.t->kind->plural, cli_namespace(), st.t->name) != ASB_OK)
        ret = cli_print_error(NULL);
    if (ret == 0 && !(st.original = json_loads(text, 0, NULL)))
        ret = 1;
    const char *tmp = getenv("TMPDIR");
    _cleanup_free_ char *path =
        ret ? NULL
            : strdup_printf("%s/asb-edit-XXXXXX.%s", tmp && *tmp ? tmp : "/tmp",
                            json ? "json" : "yaml");
    int fd = path ? mkostemps(path, 5, O_CLOEXEC) : -1;
    if (ret == 0 && fd < 0) {
        fprintf(stderr, "error: cannot create a temporary file: %s\n", strerror(errno));
        ret = 1;
    }
    if (ret == 0) {
        close(fd);
        st.path = path;
        bool keep = false;
        ret = edit_loop(&st, json, &keep);
        if (!keep)
            unlink(path);
    }
    json_decref(st.original);
    asb_client_free(st.cl);
    cli_targets_done(&t);
    return ret;
}
