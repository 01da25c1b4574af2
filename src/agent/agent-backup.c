/* Home-directory snapshots: the sandbox produces a plain tar stream (`tar -cf -`), the host
 * checks every entry and writes a gzip'd tar with libarchive, one block at a time; restore goes
 * the other way. Only regular files, directories, symlinks and hard links to a regular file
 * already in the archive, all with relative names that stay inside, are kept, so a hostile
 * sandbox cannot make the host or a later sandbox write outside the home directory. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/agent-internal.h"
#include "basic/buf.h"
#include "basic/macro.h"

static bool name_ok(const char *p)
{
    if (!p || !*p || p[0] == '/')
        return false;
    const char *s = p;
    while (*s) {
        const char *e = strchrnul(s, '/');
        if (e - s == 2 && s[0] == '.' && s[1] == '.')
            return false;
        s = *e ? e + 1 : e;
    }
    return true;
}

/* Names of the regular files already copied (pathname -> true): a hard link is kept only when it
 * points at one of them, so it can never name something outside the archive, a directory or a
 * symlink. */
static bool entry_ok(struct archive_entry *e, json_t *files)
{
    if (!name_ok(archive_entry_pathname(e)))
        return false;
    const char *link = archive_entry_hardlink(e);
    if (link)
        return name_ok(link) && json_object_get(files, link) != NULL;
    mode_t t = archive_entry_filetype(e);
    return t == AE_IFREG || t == AE_IFDIR || t == AE_IFLNK;
}

static int remember(json_t *files, struct archive_entry *e)
{
    const char *name = archive_entry_pathname(e);
    if (archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e))
        /* _nocheck: file names need not be UTF-8. */
        return json_object_set_new_nocheck(files, name, json_true()) < 0 ? -ENOMEM : 0;
    json_object_del(files, name); /* replaced by a directory, symlink or link */
    return 0;
}

/* Copies entries from rd to wr, filtering, one data block at a time (constant memory but for the
 * set of file names); returns 0 or -errno with a message. */
static int copy_loop(struct archive *rd, struct archive *wr, json_t *files, api_error *err)
{
    struct archive_entry *e;
    for (;;) {
        int rr = archive_read_next_header(rd, &e);
        if (rr == ARCHIVE_EOF)
            return 0;
        if (rr < ARCHIVE_WARN)
            return api_error_set_errno(err, -EBADMSG, "archive: %s", archive_error_string(rd));
        if (!entry_ok(e, files)) {
            archive_read_data_skip(rd);
            continue;
        }
        if (remember(files, e) < 0)
            return -ENOMEM;
        if (archive_entry_hardlink(e))
            archive_entry_set_size(e, 0);
        if (archive_write_header(wr, e) < ARCHIVE_WARN)
            return api_error_set_errno(err, -EIO, "archive: %s", archive_error_string(wr));
        const void *blk;
        size_t sz;
        la_int64_t off;
        while ((rr = archive_read_data_block(rd, &blk, &sz, &off)) == ARCHIVE_OK)
            if (sz > 0 && archive_write_data(wr, blk, sz) < 0)
                return api_error_set_errno(err, -EIO, "archive: %s", archive_error_string(wr));
        if (rr != ARCHIVE_EOF)
            return api_error_set_errno(err, -EBADMSG, "archive: %s", archive_error_string(rd));
    }
}

static int copy_entries(struct archive *rd, struct archive *wr, api_error *err)
{
    json_t *files = json_object();
    if (!files)
        return -ENOMEM;
    int r = copy_loop(rd, wr, files, err);
    json_decref(files);
    return r;
}

/* Writes the gzip'd, filtered copy of the tar that rd reads to path (via path.tmp). */
static int write_from(struct archive *rd, const char *path, api_error *err)
{
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp", path) < 0)
        return -ENOMEM;
    struct archive *wr = archive_write_new();
    if (!wr)
        return -ENOMEM;
    archive_write_set_format_pax_restricted(wr);
    archive_write_add_filter_gzip(wr);
    int r;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = api_error_set_errno(err, -errno, "cannot create %s: %s", tmp, strerror(errno));
        archive_write_free(wr);
        return r;
    }
    if (archive_write_open_fd(wr, fd) != ARCHIVE_OK)
        r = api_error_set_errno(err, -EIO, "archive: %s", archive_error_string(wr));
    else
        r = copy_entries(rd, wr, err);
    if (archive_write_close(wr) != ARCHIVE_OK && r == 0)
        r = api_error_set_errno(err, -EIO, "archive: %s", archive_error_string(wr));
    archive_write_free(wr);
    if (r == 0 && fsync(fd) < 0)
        r = api_error_set_errno(err, -errno, "fsync %s: %s", tmp, strerror(errno));
    close(fd);
    if (r == 0 && rename(tmp, path) < 0)
        r = api_error_set_errno(err, -errno, "rename %s: %s", tmp, strerror(errno));
    if (r < 0)
        unlink(tmp);
    return r;
}

static struct archive *tar_reader(void)
{
    struct archive *rd = archive_read_new();
    if (rd) {
        archive_read_support_format_tar(rd);
        archive_read_support_filter_none(rd);
    }
    return rd;
}

int agent_backup_write(const char *path, const char *tar_data, size_t tar_len, api_error *err)
{
    struct archive *rd = tar_reader();
    if (!rd)
        return -ENOMEM;
    int r;
    if (archive_read_open_memory(rd, tar_data, tar_len) != ARCHIVE_OK)
        r = api_error_set_errno(err, -EBADMSG, "archive: %s", archive_error_string(rd));
    else
        r = write_from(rd, path, err);
    archive_read_free(rd);
    return r;
}

int agent_backup_write_fd(const char *path, int in_fd, api_error *err)
{
    struct archive *rd = tar_reader();
    if (!rd)
        return -ENOMEM;
    int r;
    if (archive_read_open_fd(rd, in_fd, 65536) != ARCHIVE_OK)
        r = api_error_set_errno(err, -EBADMSG, "archive: %s", archive_error_string(rd));
    else
        r = write_from(rd, path, err);
    archive_read_free(rd);
    return r;
}

/* libarchive write callback into the buf at ud. */
static la_ssize_t mem_write(struct archive *a, void *ud, const void *p, size_t n)
{
    if (buf_append(ud, p, n) < 0) {
        archive_set_error(a, ENOMEM, "out of memory");
        return -ENOMEM; /* libarchive takes any negative count as a failure */
    }
    return (la_ssize_t)n;
}

/* Reads the backup at path and writes its filtered, uncompressed tar through wr (opened by
 * open_cb). */
static int read_into(const char *path, struct archive *wr, api_error *err)
{
    struct archive *rd = archive_read_new();
    if (!rd)
        return -ENOMEM;
    archive_read_support_format_tar(rd);
    archive_read_support_filter_gzip(rd);
    int r;
    if (archive_read_open_filename(rd, path, 65536) != ARCHIVE_OK)
        r = api_error_set_errno(err, -EIO, "cannot open %s: %s", path, archive_error_string(rd));
    else
        r = copy_entries(rd, wr, err);
    if (archive_write_close(wr) != ARCHIVE_OK && r == 0)
        r = api_error_set_errno(err, -EIO, "archive: %s", archive_error_string(wr));
    archive_read_free(rd);
    return r;
}

static struct archive *tar_writer(void)
{
    struct archive *wr = archive_write_new();
    if (wr) {
        archive_write_set_format_pax_restricted(wr);
        archive_write_add_filter_none(wr);
        archive_write_set_bytes_in_last_block(wr, 1);
    }
    return wr;
}

int agent_backup_read(const char *path, char **ret, size_t *ret_len, api_error *err)
{
    *ret = NULL;
    *ret_len = 0;
    struct archive *wr = tar_writer();
    if (!wr)
        return -ENOMEM;
    _cleanup_buf_ buf b = BUF_INIT;
    int r;
    if (archive_write_open(wr, &b, NULL, mem_write, NULL) != ARCHIVE_OK)
        r = api_error_set_errno(err, -EIO, "archive: %s", archive_error_string(wr));
    else
        r = read_into(path, wr, err);
    archive_write_free(wr);
    if (r == 0) {
        *ret_len = b.len;
        *ret = TAKE_PTR(b.data);
    }
    return r;
}

/* write(2) for pipes and files, send(MSG_NOSIGNAL) for sockets: a reader that went away is an
 * error (EPIPE), never a SIGPIPE. */
static la_ssize_t fd_write(struct archive *a, void *ud, const void *p, size_t n)
{
    int fd = *(int *)ud;
    for (;;) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == ENOTSOCK)
            k = write(fd, p, n);
        if (k >= 0)
            return k;
        if (errno != EINTR) {
            int e = errno;
            archive_set_error(a, e, "write: %s", strerror(e));
            return -e; /* libarchive takes any negative count as a failure */
        }
    }
}

int agent_backup_read_fd(const char *path, int out_fd, api_error *err)
{
    struct archive *wr = tar_writer();
    if (!wr)
        return -ENOMEM;
    int r;
    if (archive_write_open(wr, &out_fd, NULL, fd_write, NULL) != ARCHIVE_OK)
        r = api_error_set_errno(err, -EIO, "archive: %s", archive_error_string(wr));
    else
        r = read_into(path, wr, err);
    archive_write_free(wr);
    return r;
}

static bool is_backup(const char *n)
{
    size_t l = strlen(n);
    return strncmp(n, "backup-", 7) == 0 && l > 14 && strcmp(n + l - 7, ".tar.gz") == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of the backups in dir. */
static int list_backups(const char *dir, char ***ret, size_t *ret_n)
{
    *ret = NULL;
    *ret_n = 0;
    _cleanup_closedir_ DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    char **v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_backup(de->d_name))
            continue;
        char **nv = realloc(v, (n + 1) * sizeof(*v));
        if (!nv)
            break;
        v = nv;
        if (!(v[n] = strdup(de->d_name)))
            break;
        n++;
    }
    if (n)
        qsort(v, n, sizeof(*v), cmp_str);
    *ret = v;
    *ret_n = n;
    return 0;
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

int agent_backup_latest(const char *dir, char **ret)
{
    *ret = NULL;
    char **v;
    size_t n;
    int r = list_backups(dir, &v, &n);
    if (r < 0)
        return r;
    if (n > 0 && asprintf(ret, "%s/%s", dir, v[n - 1]) < 0)
        r = -ENOMEM;
    free_names(v, n);
    return r;
}

int agent_backup_rotate(const char *dir, size_t keep)
{
    char **v;
    size_t n;
    int r = list_backups(dir, &v, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i + keep < n; i++) {
        _cleanup_free_ char *p = NULL;
        if (asprintf(&p, "%s/%s", dir, v[i]) >= 0 && unlink(p) < 0 && errno != ENOENT)
            r = -errno;
    }
    free_names(v, n);
    return r;
}
