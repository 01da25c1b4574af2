/* `asb cp [-r] SRC DST`: copy a file into or out of a sandbox. Exactly one side is `NAME:PATH`
 * (NAME a sandbox or a claim); a local `-` is stdin or stdout. Content is streamed both ways:
 * files under the working root through sandboxd's file API (here), directories and absolute
 * paths as tar streams (asb-cp-tar.c). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/io-util.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-cp.h"
#include "cli/asb.h"
#include "shared/main-usage.h"

static void cp_usage(FILE *f)
{
    fprintf(f, "Usage: asb cp [-r] LOCAL NAME:PATH | NAME:PATH LOCAL\n\n"
               "Copy a file (or with -r a directory) into or out of the sandbox NAME (or the\n"
               "sandbox of the claim NAME). A relative PATH is relative to the sandbox's working\n"
               "root (/workspace), an absolute one is that path; a LOCAL of - is stdin or stdout.\n"
               "Copying to a directory (or a path ending in /) keeps the source's name.\n\n"
               "Options:\n"
               "  -r, --recursive  copy directories (modes and symbolic links kept)\n"
               "  -h, --help       show this help\n" CLI_GLOBAL_HELP);
}

/* NAME:PATH? Local paths that start with '/' or '.' are never remote (as kubectl). */
static bool split_remote(const char *arg, char **ret_name, const char **ret_path)
{
    const char *colon = strchr(arg, ':');
    if (!colon || colon == arg || arg[0] == '/' || arg[0] == '.' || memchr(arg, '/', colon - arg))
        return false;
    *ret_name = strndup(arg, colon - arg);
    *ret_path = colon + 1;
    return *ret_name != NULL;
}

static const char *base_name(const char *path)
{
    const char *end = path + strlen(path);
    while (end > path && end[-1] == '/')
        end--;
    const char *b = end;
    while (b > path && b[-1] != '/')
        b--;
    static char buf[4096];
    snprintf(buf, sizeof(buf), "%.*s", (int)(end - b), b);
    return buf;
}

static long source_fd(char *buf, size_t size, void *payload)
{
    int fd = *(int *)payload;
    for (;;) {
        ssize_t n = read(fd, buf, size);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -errno : (long)n;
    }
}

static int sink_fd(const char *data, size_t len, void *payload)
{
    int fd = *(int *)payload;
    return loop_write(fd, data, len) < 0 ? 1 : 0;
}

static int upload(asb_sandbox *s, const char *sname, const char *local, const char *rpath)
{
    _cleanup_close_ int fd = -1;
    int in = STDIN_FILENO;
    unsigned int mode = 0644;
    const char *lname = "stdin";
    if (strcmp(local, "-") != 0) {
        fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat stt;
        if (fd < 0 || fstat(fd, &stt) < 0) {
            fprintf(stderr, "error: %s: %m\n", local);
            return 1;
        }
        if (S_ISDIR(stt.st_mode)) {
            fprintf(stderr, "error: %s is a directory (use asb cp -r to copy a directory)\n",
                    local);
            return 1;
        }
        mode = stt.st_mode & 0777;
        in = fd;
        lname = base_name(local);
    }
    /* Into a directory: keep the name. */
    _cleanup_free_ char *target = NULL;
    size_t rl = strlen(rpath);
    bool dir = rl == 0 || rpath[rl - 1] == '/';
    if (!dir) {
        asb_sandbox_file_entry *e = NULL;
        size_t n = 0;
        if (asb_sandbox_file_list(&e, &n, s, rpath) == ASB_OK) {
            dir = true;
            asb_sandbox_file_entries_free(e, n);
        }
    }
    if (dir) {
        if (in == STDIN_FILENO) {
            fprintf(stderr, "error: %s:%s is a directory: name the file to write stdin to\n", sname,
                    rpath);
            return 1;
        }
        if (asprintf(&target, "%s%s%s", rpath, rl && rpath[rl - 1] != '/' ? "/" : "", lname) < 0)
            return 1;
    } else if (!(target = strdup(rpath)))
        return 1;
    int r = asb_sandbox_file_write(s, target, mode, source_fd, &in);
    if (r == ASB_ECANCELLED) {
        fprintf(stderr, "error: reading %s: %m\n", local);
        return 1;
    }
    if (r != ASB_OK) {
        char ctx[4200];
        snprintf(ctx, sizeof(ctx), "%s:%s", sname, target);
        return cli_print_sandbox_error(ctx);
    }
    return 0;
}

static int download(asb_sandbox *s, const char *sname, const char *rpath, const char *local)
{
    char ctx[4200];
    snprintf(ctx, sizeof(ctx), "%s:%s", sname, rpath);
    /* A directory would come back as its JSON listing: refuse it. */
    asb_sandbox_file_entry *e = NULL;
    size_t n = 0;
    if (!*rpath || asb_sandbox_file_list(&e, &n, s, rpath) == ASB_OK) {
        asb_sandbox_file_entries_free(e, n);
        fprintf(stderr, "error: %s is a directory (use asb cp -r to copy a directory)\n", ctx);
        return 1;
    }
    if (strcmp(local, "-") == 0) {
        int out = STDOUT_FILENO;
        int r = asb_sandbox_file_read(s, rpath, sink_fd, &out);
        if (r > 0) {
            fprintf(stderr, "error: writing to stdout: %m\n");
            return 1;
        }
        return r == ASB_OK ? 0 : cli_print_sandbox_error(ctx);
    }
    _cleanup_free_ char *dst = NULL;
    struct stat stt;
    size_t ll = strlen(local);
    if ((stat(local, &stt) == 0 && S_ISDIR(stt.st_mode)) || local[ll - 1] == '/') {
        if (asprintf(&dst, "%s%s%s", local, local[ll - 1] == '/' ? "" : "/", base_name(rpath)) < 0)
            return 1;
    } else if (!(dst = strdup(local)))
        return 1;
    /* Written to a temporary file beside the target and renamed: a failed copy leaves nothing. */
    _cleanup_free_ char *tmp = NULL;
    _cleanup_free_ char *dcopy = strdup(dst);
    if (!dcopy || asprintf(&tmp, "%s/.asb-cp.XXXXXX", dirname(dcopy)) < 0)
        return 1;
    _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "error: %s: %m\n", dst);
        return 1;
    }
    mode_t um = umask(0);
    umask(um);
    (void)fchmod(fd, 0666 & ~um);
    int r = asb_sandbox_file_read(s, rpath, sink_fd, &fd);
    if (r != ASB_OK) {
        int saved = errno;
        unlink(tmp);
        if (r > 0) {
            errno = saved;
            fprintf(stderr, "error: writing %s: %m\n", dst);
            return 1;
        }
        return cli_print_sandbox_error(ctx);
    }
    if (fsync(fd) < 0 || rename(tmp, dst) < 0) {
        fprintf(stderr, "error: %s: %m\n", dst);
        unlink(tmp);
        return 1;
    }
    return 0;
}

int asb_cp(int argc, char **argv)
{
    static const struct option opts[] = {{"recursive", no_argument, NULL, 'r'},
                                         {"help", no_argument, NULL, 'h'},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    bool recursive = false;
    int c;
    while ((c = getopt_long(argc, argv, "rh" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c == 'r') {
            recursive = true;
            continue;
        }
        return cli_usage_option(c, argv, cp_usage);
    }
    if (argc - optind != 2) {
        fprintf(stderr, "error: expected a source and a destination\n");
        return main_usage_error(cp_usage);
    }
    const char *src = argv[optind], *dst = argv[optind + 1];
    _cleanup_free_ char *sname = NULL, *dname = NULL;
    const char *spath = NULL, *dpath = NULL;
    bool sr = split_remote(src, &sname, &spath), dr = split_remote(dst, &dname, &dpath);
    if (sr == dr) {
        fprintf(stderr, "error: exactly one of SRC and DST must be NAME:PATH (a sandbox file)\n");
        return 2;
    }
    if (!*(sr ? dst : src)) {
        fprintf(stderr, "error: the local path may not be empty\n");
        return 2;
    }
    asb_client *cl = NULL;
    int ret = cli_client(&cl);
    if (ret)
        return ret;
    asb_sandbox *s = NULL;
    ret = cli_sandbox_open(cl, sr ? sname : dname, &s);
    asb_client_free(cl);
    if (ret)
        return ret;
    signal(SIGPIPE, SIG_IGN);
    /* Directories and absolute paths go as tar streams (sandboxd's file API serves the working
     * root only); single files under it stream through the file API. */
    if (recursive || (sr ? spath : dpath)[0] == '/')
        ret = sr ? cli_cp_tar_download(s, sname, spath, dst, recursive)
                 : cli_cp_tar_upload(s, dname, src, dpath, recursive);
    else
        ret = sr ? download(s, sname, spath, dst) : upload(s, dname, src, dpath);
    asb_sandbox_free(s);
    return ret;
}
