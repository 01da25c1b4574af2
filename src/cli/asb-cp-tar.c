/* `asb cp` through tar streams, as kubectl cp: directories (-r) and sandbox paths that are
 * absolute (sandboxd's file API serves the working root only). `tar` runs in the sandbox (through
 * sh, as kubectl needs it there too) and libarchive here (asb-archive.h): modes and symbolic links
 * are kept both ways. Relative sandbox paths are relative to the working root, as for the file
 * API (the process's default directory). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/macro.h"
#include "cli/asb-archive.h"
#include "cli/asb-cli.h"
#include "cli/asb-cp.h"

#define A(name) cli_archive.name

/* Exit codes of the scripts below, told apart here (never their text). */
#define RC_MISSING 2
#define RC_IS_DIR 3
#define RC_NO_COMMAND 127

/* Download: in the sandbox, the tar stream of "$2" in directory "$1" ("$3" 1: a directory may
 * be sent). */
static const char download_script[] = "cd \"$1\" || exit 2; "
                                      "[ -e \"$2\" ] || [ -L \"$2\" ] || exit 2; "
                                      "if [ \"$3\" != 1 ] && [ -d \"$2\" ]; then exit 3; fi; "
                                      "exec tar cf - \"$2\"";

/* Upload: the tar stream on stdin unpacked in "$1" (made first), modes kept, times now. */
static const char upload_script[] = "mkdir -p \"$1\" && cd \"$1\" && exec tar xmpf -";

/* A sandbox path as the scripts take it: the directory and the name in it; relative paths start
 * with "./" so that neither can be taken for an option. Owned. */
static int split_path(const char *path, char **ret_dir, char **ret_base)
{
    size_t l = strlen(path);
    while (l > 1 && path[l - 1] == '/')
        l--;
    _cleanup_free_ char *p = strndup(path, l);
    if (!p)
        return -ENOMEM;
    char *slash = strrchr(p, '/');
    const char *dir, *base;
    if (!*p || strcmp(p, ".") == 0 || strcmp(p, "/") == 0) {
        dir = *p == '/' ? "/" : ".";
        base = ".";
    } else if (!slash) {
        dir = ".";
        base = p;
    } else {
        *slash = '\0';
        dir = slash == p ? "/" : p;
        base = slash + 1;
    }
    bool rel = dir[0] != '/';
    if (asprintf(ret_dir, "%s%s", rel && strncmp(dir, "./", 2) && strcmp(dir, ".") ? "./" : "",
                 dir) < 0)
        return -ENOMEM;
    if (asprintf(ret_base, "%s%s", strcmp(base, ".") ? "./" : "", base) < 0) {
        free(*ret_dir);
        return -ENOMEM;
    }
    return 0;
}

/* ---- download ---- */

typedef struct remote_run {
    asb_sandbox *s;
    const char *const *argv;
    int out_fd; /* download: the pipe libarchive reads; closed when the process ends */
    int exit_code, r;
    buf err; /* its stderr, for the message */
    int pid;
    /* upload: what the writer thread sends */
    int (*writer)(struct remote_run *rr);
    const void *writer_ctx;
    pthread_t writer_thread;
    bool writer_started;
    int writer_r;
} remote_run;

static int on_stdout(const char *data, size_t len, void *payload)
{
    remote_run *rr = payload;
    while (len > 0) {
        ssize_t n = write(rr->out_fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return 1; /* the reader stopped: cancels the process */
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int on_stderr(const char *data, size_t len, void *payload)
{
    remote_run *rr = payload;
    return buf_append(&rr->err, data, len) < 0 ? 1 : 0;
}

static void *writer_main(void *arg)
{
    remote_run *rr = arg;
    rr->writer_r = rr->writer(rr);
    /* end of input, also after a failure (the tar in the sandbox then fails too) */
    (void)asb_sandbox_write_stdin(rr->s, rr->pid, NULL, 0, 1);
    return NULL;
}

static int on_init(int process_id, void *payload)
{
    remote_run *rr = payload;
    rr->pid = process_id;
    if (!rr->writer)
        return 0;
    if (pthread_create(&rr->writer_thread, NULL, writer_main, rr) != 0)
        return 1;
    rr->writer_started = true;
    return 0;
}

static void *run_remote(void *arg)
{
    remote_run *rr = arg;
    asb_sandbox_process_options po = ASB_SANDBOX_PROCESS_OPTIONS_INIT;
    po.close_stdin = rr->writer == NULL;
    asb_sandbox_callbacks cbs = ASB_SANDBOX_CALLBACKS_INIT;
    cbs.init_cb = on_init;
    cbs.stdout_cb = on_stdout;
    cbs.stderr_cb = on_stderr;
    cbs.payload = rr;
    rr->r = asb_sandbox_start(&rr->exit_code, rr->s, rr->argv, &po, &cbs);
    if (rr->writer_started)
        pthread_join(rr->writer_thread, NULL);
    if (rr->out_fd >= 0) {
        close(rr->out_fd);
        rr->out_fd = -1;
    }
    return NULL;
}

/* The error of a remote run that failed, as the user reads it. Returns 1. */
static int remote_error(const remote_run *rr, const char *ctx, bool download)
{
    if (rr->r != ASB_OK && rr->r != 1)
        return cli_print_sandbox_error(ctx);
    if (download && rr->exit_code == RC_MISSING)
        fprintf(stderr, "error: %s: path does not exist within the sandbox\n", ctx);
    else if (download && rr->exit_code == RC_IS_DIR)
        fprintf(stderr, "error: %s is a directory (use asb cp -r to copy a directory)\n", ctx);
    else if (rr->exit_code == RC_NO_COMMAND)
        fprintf(stderr, "error: %s: copying needs sh and tar in the sandbox: %.*s\n", ctx,
                (int)rr->err.len, rr->err.data ?: "");
    else
        fprintf(stderr, "error: %s: tar in the sandbox failed (exit %d): %.*s\n", ctx,
                rr->exit_code, (int)rr->err.len, rr->err.data ?: "");
    return 1;
}

/* The entry's name under the archived base ("./base/x" -> "/x", "./base" -> ""), or NULL when it
 * is not under it or climbs out with "..". Points into name. */
static const char *under_base(const char *name, const char *base)
{
    while (strncmp(name, "./", 2) == 0)
        name += 2;
    if (strncmp(base, "./", 2) == 0)
        base += 2;
    const char *rest;
    if (strcmp(base, ".") == 0)
        rest = strcmp(name, ".") == 0 ? "" : name;
    else {
        size_t bl = strlen(base);
        if (strncmp(name, base, bl) != 0 || (name[bl] && name[bl] != '/'))
            return NULL;
        rest = name + bl;
    }
    for (const char *p = rest; (p = strstr(p, "..")); p += 2)
        if ((p == rest || p[-1] == '/') && (!p[2] || p[2] == '/'))
            return NULL;
    return rest;
}

/* Renames one entry (and its hard link target) from under base to under target. 0 or -EPERM. */
static int rename_entry(struct archive_entry *e, const char *base, const char *target)
{
    const char *rest = under_base(A(archive_entry_pathname)(e), base);
    if (!rest)
        return -EPERM;
    _cleanup_free_ char *np = NULL, *nl = NULL;
    if (asprintf(&np, "%s%s%s", target, *rest && rest[0] != '/' ? "/" : "", rest) < 0)
        return -ENOMEM;
    A(archive_entry_set_pathname)(e, np);
    const char *hl = A(archive_entry_hardlink)(e);
    if (hl) {
        const char *hrest = under_base(hl, base);
        if (!hrest)
            return -EPERM;
        if (asprintf(&nl, "%s%s%s", target, *hrest && hrest[0] != '/' ? "/" : "", hrest) < 0)
            return -ENOMEM;
        A(archive_entry_set_hardlink)(e, nl);
    }
    return 0;
}

/* Copies the entry's data from r to w (a disk writer) or, w NULL, to stdout. */
static int copy_data(struct archive *r, struct archive *w)
{
    const void *blk;
    size_t size;
    la_int64_t off;
    int k;
    while ((k = A(archive_read_data_block)(r, &blk, &size, &off)) == ARCHIVE_OK) {
        if (w ? A(archive_write_data_block)(w, blk, size, off) < ARCHIVE_OK
              : fwrite(blk, 1, size, stdout) != size)
            return -EIO;
    }
    return k == ARCHIVE_EOF ? 0 : -EIO;
}

/* Unpacks the stream on fd: under target (renamed from base), or the one file to stdout. What
 * went wrong goes to msg (printed by the caller once it knows how the tar in the sandbox ended). */
static int unpack(int fd, const char *base, const char *target, bool to_stdout, const char *ctx,
                  buf *msg)
{
    struct archive *r = A(archive_read_new)(), *w = to_stdout ? NULL : A(archive_write_disk_new)();
    if (!r || (!to_stdout && !w))
        return -ENOMEM;
    A(archive_read_support_format_tar)(r);
    if (w) {
        A(archive_write_disk_set_options)
        (w, ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                ARCHIVE_EXTRACT_SECURE_NODOTDOT);
        A(archive_write_disk_set_standard_lookup)(w);
    }
    int ret = 0;
    struct archive_entry *e;
    if (A(archive_read_open_fd)(r, fd, 65536) != ARCHIVE_OK)
        ret = -EIO;
    for (int k; ret == 0 && (k = A(archive_read_next_header)(r, &e)) != ARCHIVE_EOF;) {
        if (k < ARCHIVE_WARN) {
            ret = -EIO;
            break;
        }
        if (to_stdout) {
            if (A(archive_entry_filetype)(e) != AE_IFREG) {
                buf_appendf(
                    msg, "error: %s is not a regular file: it cannot be written to stdout\n", ctx);
                ret = -EISDIR;
            } else
                ret = copy_data(r, NULL);
            continue;
        }
        if ((ret = rename_entry(e, base, target)) < 0) {
            buf_appendf(msg, "error: %s: refusing the archive entry %s (outside what was asked)\n",
                        ctx, A(archive_entry_pathname)(e));
            break;
        }
        if (A(archive_write_header)(w, e) < ARCHIVE_WARN || copy_data(r, w) < 0 ||
            A(archive_write_finish_entry)(w) < ARCHIVE_WARN) {
            buf_appendf(msg, "error: %s: %s\n", A(archive_entry_pathname)(e),
                        A(archive_error_string)(w) ?: "cannot write");
            ret = -EIO;
        }
    }
    if (ret == -EIO && msg->len == 0)
        buf_appendf(msg, "error: %s: %s\n", ctx, A(archive_error_string)(r) ?: "bad archive");
    A(archive_read_free)(r);
    if (w)
        A(archive_write_free)(w);
    return ret;
}

int cli_cp_tar_download(asb_sandbox *s, const char *sname, const char *rpath, const char *local,
                        bool recursive)
{
    char ctx[4200];
    snprintf(ctx, sizeof(ctx), "%s:%s", sname, rpath);
    if (cli_archive_load() < 0)
        return 1;
    _cleanup_free_ char *dir = NULL, *base = NULL, *target = NULL;
    if (split_path(rpath, &dir, &base) < 0)
        return 1;
    bool to_stdout = strcmp(local, "-") == 0;
    struct stat st;
    size_t ll = strlen(local);
    const char *bn = strrchr(base, '/') ? strrchr(base, '/') + 1 : base;
    if (!to_stdout && ((stat(local, &st) == 0 && S_ISDIR(st.st_mode)) || local[ll - 1] == '/') &&
        strcmp(bn, ".") != 0) {
        if (asprintf(&target, "%s%s%s", local, local[ll - 1] == '/' ? "" : "/", bn) < 0)
            return 1;
    } else if (!(target = strdup(local)))
        return 1;
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return 1;
    const char *argv[] = {"sh", "-c", download_script,       "sh",
                          dir,  base, recursive ? "1" : "0", NULL};
    remote_run rr = {.s = s, .argv = argv, .out_fd = pp[1], .exit_code = -1};
    pthread_t t;
    if (pthread_create(&t, NULL, run_remote, &rr) != 0) {
        close(pp[0]);
        close(pp[1]);
        return 1;
    }
    _cleanup_buf_ buf msg = BUF_INIT;
    int k = unpack(pp[0], base, target, to_stdout, ctx, &msg);
    /* what follows the end of the archive (tar pads it to its blocking factor) is read to the
     * end; after a failure, a writer still writing gets EPIPE and stops the process */
    char sink[4096];
    for (ssize_t n;
         k == 0 && ((n = read(pp[0], sink, sizeof(sink))) > 0 || (n < 0 && errno == EINTR));)
        ;
    close(pp[0]);
    pthread_join(t, NULL);
    int ret = 0;
    if (rr.r == ASB_OK && rr.exit_code == 0)
        ret = k < 0;
    else if (k < 0 && rr.r == 1) /* we stopped reading: our error is the one */
        ret = 1;
    else {
        ret = remote_error(&rr, ctx, true);
        msg.len = 0; /* what the reader said of a stream that broke off is no news */
    }
    if (msg.len)
        fwrite(msg.data, 1, msg.len, stderr);
    buf_done(&rr.err);
    return ret;
}

/* ---- upload ---- */

typedef struct upload_src {
    const char *local; /* a path, or "-" */
    const char *name;  /* its name in the archive */
    const char *data;  /* stdin's content */
    size_t len;
} upload_src;

static la_ssize_t send_block(struct archive *a, void *payload, const void *data, size_t len)
{
    (void)a;
    remote_run *rr = payload;
    return asb_sandbox_write_stdin(rr->s, rr->pid, data, len, 0) == ASB_OK ? (la_ssize_t)len : -1;
}

/* Every entry under src->local (symbolic links as links), renamed to src->name, to w. */
static int pack_tree(struct archive *w, const upload_src *src)
{
    struct archive *d = A(archive_read_disk_new)();
    struct archive_entry *e = A(archive_entry_new)();
    int ret = d && e ? 0 : -ENOMEM;
    if (ret == 0) {
        A(archive_read_disk_set_standard_lookup)(d);
        A(archive_read_disk_set_symlink_physical)(d);
        if (A(archive_read_disk_open)(d, src->local) != ARCHIVE_OK)
            ret = -EIO;
    }
    size_t pl = strlen(src->local);
    char blk[65536];
    for (int k; ret == 0 && (k = A(archive_read_next_header2)(d, e)) != ARCHIVE_EOF;) {
        if (k < ARCHIVE_WARN) {
            fprintf(stderr, "error: %s: %s\n", src->local, A(archive_error_string)(d) ?: "");
            ret = -EIO;
            break;
        }
        A(archive_read_disk_descend)(d);
        const char *path = A(archive_entry_pathname)(e);
        _cleanup_free_ char *np = NULL;
        if (asprintf(&np, "%s%s", src->name, strncmp(path, src->local, pl) == 0 ? path + pl : "") <
            0) {
            ret = -ENOMEM;
            break;
        }
        A(archive_entry_set_pathname)(e, np);
        if (A(archive_write_header)(w, e) < ARCHIVE_WARN) {
            ret = -EIO;
            break;
        }
        for (la_ssize_t n; A(archive_entry_filetype)(e) == AE_IFREG &&
                           (n = A(archive_read_data)(d, blk, sizeof(blk))) != 0;)
            if (n < 0 || A(archive_write_data)(w, blk, (size_t)n) < 0) {
                ret = -EIO;
                break;
            }
    }
    if (d) {
        A(archive_read_close)(d);
        A(archive_read_free)(d);
    }
    A(archive_entry_free)(e);
    return ret;
}

/* stdin's content as one file, 0644. */
static int pack_stdin(struct archive *w, const upload_src *src)
{
    struct archive_entry *e = A(archive_entry_new)();
    if (!e)
        return -ENOMEM;
    A(archive_entry_set_pathname)(e, src->name);
    A(archive_entry_set_filetype)(e, AE_IFREG);
    A(archive_entry_set_perm)(e, 0644);
    A(archive_entry_set_size)(e, (la_int64_t)src->len);
    int ret = A(archive_write_header)(w, e) < ARCHIVE_WARN ||
                      (src->len && A(archive_write_data)(w, src->data, src->len) < 0)
                  ? -EIO
                  : 0;
    A(archive_entry_free)(e);
    return ret;
}

static int write_archive(remote_run *rr)
{
    const upload_src *src = rr->writer_ctx;
    struct archive *w = A(archive_write_new)();
    if (!w)
        return -ENOMEM;
    A(archive_write_set_format_pax_restricted)(w);
    int ret = A(archive_write_open)(w, rr, NULL, send_block, NULL) == ARCHIVE_OK ? 0 : -EIO;
    if (ret == 0)
        ret = src->data || strcmp(src->local, "-") == 0 ? pack_stdin(w, src) : pack_tree(w, src);
    if (A(archive_write_close)(w) != ARCHIVE_OK && ret == 0)
        ret = -EIO;
    A(archive_write_free)(w);
    return ret;
}

static const char *last_name(const char *path)
{
    const char *end = path + strlen(path);
    while (end > path + 1 && end[-1] == '/')
        end--;
    const char *b = end;
    while (b > path && b[-1] != '/')
        b--;
    return b;
}

int cli_cp_tar_upload(asb_sandbox *s, const char *sname, const char *local, const char *rpath,
                      bool recursive)
{
    char ctx[4200];
    snprintf(ctx, sizeof(ctx), "%s:%s", sname, rpath);
    if (cli_archive_load() < 0)
        return 1;
    bool from_stdin = strcmp(local, "-") == 0;
    /* "dir/" is "dir": the archive's names are made from it */
    _cleanup_free_ char *lcopy = strdup(local);
    if (!lcopy)
        return 1;
    for (size_t ll = strlen(lcopy); ll > 1 && lcopy[ll - 1] == '/';)
        lcopy[--ll] = '\0';
    local = lcopy;
    struct stat st;
    if (!from_stdin && stat(local, &st) < 0) {
        fprintf(stderr, "error: %s: %m\n", local);
        return 1;
    }
    if (!from_stdin && S_ISDIR(st.st_mode) && !recursive) {
        fprintf(stderr, "error: %s is a directory (use asb cp -r to copy a directory)\n", local);
        return 1;
    }
    /* Into an existing directory (or one named with a trailing /): keep the source's name. */
    size_t rl = strlen(rpath);
    bool into = rl == 0 || rpath[rl - 1] == '/';
    if (!into) {
        const char *test[] = {"sh", "-c", "test -d \"$1\"", "sh", rpath, NULL};
        asb_sandbox_result *res = NULL;
        into = asb_sandbox_execute(&res, s, test, NULL) == ASB_OK && res->exit_code == 0;
        asb_sandbox_result_free(res);
    }
    if (into && from_stdin) {
        fprintf(stderr, "error: %s is a directory: name the file to write stdin to\n", ctx);
        return 1;
    }
    _cleanup_free_ char *dir = NULL, *base = NULL, *name = NULL;
    if (into) {
        if (split_path(*rpath ? rpath : ".", &dir, &base) < 0 ||
            asprintf(&name, "%s", last_name(local)) < 0)
            return 1;
        /* the directory itself is where the tar unpacks */
        char *joined = NULL;
        if (asprintf(&joined, "%s/%s", dir, base) < 0)
            return 1;
        free(dir);
        dir = joined;
    } else if (split_path(rpath, &dir, &base) < 0 || !(name = strdup(base)))
        return 1;
    upload_src src = {.local = local, .name = name};
    _cleanup_free_ char *data = NULL;
    if (from_stdin) {
        size_t len = 0;
        if (cli_read_file("-", &data, &len) < 0) {
            fprintf(stderr, "error: reading stdin: %m\n");
            return 1;
        }
        src.data = data ?: "";
        src.len = len;
    }
    const char *argv[] = {"sh", "-c", upload_script, "sh", dir, NULL};
    remote_run rr = {.s = s,
                     .argv = argv,
                     .out_fd = -1,
                     .exit_code = -1,
                     .writer = write_archive,
                     .writer_ctx = &src};
    run_remote(&rr);
    int ret = 0;
    if (rr.r != ASB_OK || rr.exit_code != 0)
        ret = remote_error(&rr, ctx, false);
    else if (rr.writer_r < 0) {
        fprintf(stderr, "error: %s: cannot send %s\n", ctx, local);
        ret = 1;
    }
    buf_done(&rr.err);
    return ret;
}
