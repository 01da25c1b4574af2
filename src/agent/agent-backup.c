/* Home-directory snapshots: the sandbox produces a plain tar stream (`tar -cf -`), the host
 * checks every entry and writes a gzip'd tar with libarchive; restore goes the other way. Only
 * regular files, directories and symlinks with relative names that stay inside are kept, so a
 * hostile sandbox cannot make the host or a later sandbox write outside the home directory. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent-internal.h"
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

static bool entry_ok(struct archive_entry *e)
{
    mode_t t = archive_entry_filetype(e);
    if (t != AE_IFREG && t != AE_IFDIR && t != AE_IFLNK)
        return false;
    if (archive_entry_hardlink(e))
        return false;
    return name_ok(archive_entry_pathname(e));
}

/* Copies entries from rd to wr, filtering; returns 0 or -EBADMSG with a message. */
static int copy_entries(struct archive *rd, struct archive *wr, char **ret_error)
{
    struct archive_entry *e;
    for (;;) {
        int rr = archive_read_next_header(rd, &e);
        if (rr == ARCHIVE_EOF)
            return 0;
        if (rr < ARCHIVE_WARN)
            return agent_fail(ret_error, -EBADMSG, "archive: %s", archive_error_string(rd));
        if (!entry_ok(e)) {
            archive_read_data_skip(rd);
            continue;
        }
        if (archive_write_header(wr, e) < ARCHIVE_WARN)
            return agent_fail(ret_error, -EIO, "archive: %s", archive_error_string(wr));
        const void *blk;
        size_t sz;
        la_int64_t off;
        while ((rr = archive_read_data_block(rd, &blk, &sz, &off)) == ARCHIVE_OK)
            if (archive_write_data(wr, blk, sz) < 0)
                return agent_fail(ret_error, -EIO, "archive: %s", archive_error_string(wr));
        if (rr != ARCHIVE_EOF)
            return agent_fail(ret_error, -EBADMSG, "archive: %s", archive_error_string(rd));
    }
}

int agent_backup_write(const char *path, const char *tar_data, size_t tar_len, char **ret_error)
{
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp", path) < 0)
        return -ENOMEM;
    struct archive *rd = archive_read_new(), *wr = archive_write_new();
    int r = -ENOMEM;
    if (!rd || !wr)
        goto out;
    archive_read_support_format_tar(rd);
    archive_read_support_filter_none(rd);
    archive_write_set_format_pax_restricted(wr);
    archive_write_add_filter_gzip(wr);
    if (archive_read_open_memory(rd, tar_data, tar_len) != ARCHIVE_OK) {
        r = agent_fail(ret_error, -EBADMSG, "archive: %s", archive_error_string(rd));
        goto out;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        r = agent_fail(ret_error, -errno, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (archive_write_open_fd(wr, fd) != ARCHIVE_OK) {
        close(fd);
        r = agent_fail(ret_error, -EIO, "archive: %s", archive_error_string(wr));
        goto out;
    }
    r = copy_entries(rd, wr, ret_error);
    if (archive_write_close(wr) != ARCHIVE_OK && r == 0)
        r = agent_fail(ret_error, -EIO, "archive: %s", archive_error_string(wr));
    if (r == 0 && fsync(fd) < 0)
        r = agent_fail(ret_error, -errno, "fsync %s: %s", tmp, strerror(errno));
    close(fd);
    if (r == 0 && rename(tmp, path) < 0)
        r = agent_fail(ret_error, -errno, "rename %s: %s", tmp, strerror(errno));
    if (r < 0)
        unlink(tmp);
out:
    if (rd)
        archive_read_free(rd);
    if (wr)
        archive_write_free(wr);
    return r;
}

typedef struct membuf {
    char *data;
    size_t len, cap;
} membuf;

static la_ssize_t mem_write(struct archive *a, void *ud, const void *p, size_t n)
{
    membuf *b = ud;
    if (b->len + n > b->cap) {
        size_t cap = MAX(b->cap * 2, b->len + n + 65536);
        char *d = realloc(b->data, cap);
        if (!d) {
            archive_set_error(a, ENOMEM, "out of memory");
            return -1;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return (la_ssize_t)n;
}

int agent_backup_read(const char *path, char **ret, size_t *ret_len, char **ret_error)
{
    *ret = NULL;
    *ret_len = 0;
    struct archive *rd = archive_read_new(), *wr = archive_write_new();
    membuf b = {0};
    int r = -ENOMEM;
    if (!rd || !wr)
        goto out;
    archive_read_support_format_tar(rd);
    archive_read_support_filter_gzip(rd);
    archive_write_set_format_pax_restricted(wr);
    archive_write_add_filter_none(wr);
    archive_write_set_bytes_in_last_block(wr, 1);
    if (archive_read_open_filename(rd, path, 65536) != ARCHIVE_OK) {
        r = agent_fail(ret_error, -EIO, "cannot open %s: %s", path, archive_error_string(rd));
        goto out;
    }
    if (archive_write_open(wr, &b, NULL, mem_write, NULL) != ARCHIVE_OK) {
        r = agent_fail(ret_error, -EIO, "archive: %s", archive_error_string(wr));
        goto out;
    }
    r = copy_entries(rd, wr, ret_error);
    if (archive_write_close(wr) != ARCHIVE_OK && r == 0)
        r = agent_fail(ret_error, -EIO, "archive: %s", archive_error_string(wr));
    if (r == 0) {
        *ret = TAKE_PTR(b.data);
        *ret_len = b.len;
    }
out:
    free(b.data);
    if (rd)
        archive_read_free(rd);
    if (wr)
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
