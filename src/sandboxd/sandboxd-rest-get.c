/* GET/HEAD /v1/files/{path}: directory listings and file downloads (ranges, conditionals),
 * streamed from an fd opened once, so a download survives the file being replaced. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/confine.h"
#include "basic/macro.h"
#include "sandboxd/sandboxd-rest-internal.h"

typedef struct dir_entry {
    char *name;
    struct stat st;
} dir_entry;

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const dir_entry *)a)->name, ((const dir_entry *)b)->name);
}

/* Symlink entry: re-confine "<path>/<name>"; returns 0 with the target's stat, or <0 to omit. */
static int stat_link_target(sandboxd *sd, const char *dir_path, const char *name, struct stat *st)
{
    _cleanup_free_ char *p = NULL;
    if (asprintf(&p, "%s/%s", dir_path, name) < 0)
        return -ENOMEM;
    confined c = CONFINED_INIT;
    int r = confine_resolve(sd->root_fd, sd->root_path, p, &c);
    if (r < 0)
        return r;
    if (c.missing[0])
        r = -ENOENT;
    else if (fstatat(c.dir_fd, c.name, st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0)
        r = negative_errno();
    else if (S_ISLNK(st->st_mode))
        r = -ENOENT; /* dangling */
    confined_done(&c);
    return r;
}

static void entry_json(json_buf *b, const dir_entry *e)
{
    char tmp[64];
    json_buf_lit(b, "{\"name\":");
    json_buf_string(b, e->name, strlen(e->name));
    snprintf(tmp, sizeof(tmp), ",\"size\":%" PRId64 ",\"type\":\"%s\",\"modified_at\":\"",
             (int64_t)e->st.st_size, S_ISDIR(e->st.st_mode) ? "directory" : "file");
    json_buf_lit(b, tmp);
    rest_rfc3339_format(e->st.st_mtim.tv_sec, tmp, sizeof(tmp));
    json_buf_lit(b, tmp);
    snprintf(tmp, sizeof(tmp), "\",\"mode\":\"%04o\"}", (unsigned)(e->st.st_mode & 0777));
    json_buf_lit(b, tmp);
}

static void entries_free(dir_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

static enum MHD_Result list_dir(rest_request *req, struct MHD_Connection *c, int fd)
{
    sandboxd *sd = req->srv->sd;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return rest_queue_error(req, c, STATUS_INTERNAL, strerror(errno));
    }
    dir_entry *v = NULL;
    size_t n = 0, cap = 0;
    int err = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* vanished */
        if (S_ISLNK(st.st_mode) && stat_link_target(sd, req->file_path, de->d_name, &st) < 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            dir_entry *nv = realloc(v, cap * sizeof(*v));
            if (!nv) {
                err = ENOMEM;
                break;
            }
            v = nv;
        }
        v[n].name = strdup(de->d_name);
        if (!v[n].name) {
            err = ENOMEM;
            break;
        }
        v[n++].st = st;
        errno = 0;
    }
    if (!err && errno)
        err = errno;
    closedir(d);
    if (err) {
        entries_free(v, n);
        return rest_queue_error(req, c, STATUS_INTERNAL, strerror(err));
    }
    if (n > 0)
        qsort(v, n, sizeof(*v), cmp_entry);
    json_buf b = {0};
    json_buf_lit(&b, "{\"path\":");
    const char *p = req->file_path;
    if (p[0] == '/')
        json_buf_string(&b, p, strlen(p));
    else {
        _cleanup_free_ char *slashed = NULL;
        if (asprintf(&slashed, "/%s", p) >= 0)
            json_buf_string(&b, slashed, strlen(slashed));
        else
            b.oom = true;
    }
    json_buf_lit(&b, ",\"entries\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            json_buf_lit(&b, ",");
        entry_json(&b, &v[i]);
    }
    json_buf_lit(&b, "]}\n");
    entries_free(v, n);
    return rest_queue_json(req, c, MHD_HTTP_OK, &b);
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static enum MHD_Result queue_empty(rest_request *req, struct MHD_Connection *c, unsigned status,
                                   const char *last_modified)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    if (last_modified)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LAST_MODIFIED, last_modified);
    return rest_queue_response(req, c, status, resp);
}

static enum MHD_Result queue_range_error(rest_request *req, struct MHD_Connection *c,
                                         rest_range_result rr, int64_t size)
{
    const char *msg =
        rr == RANGE_NO_OVERLAP ? "invalid range: failed to overlap\n" : "invalid range\n";
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(msg), (void *)msg, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (rr == RANGE_NO_OVERLAP) {
        char cr_buf[64];
        snprintf(cr_buf, sizeof(cr_buf), "bytes */%" PRId64, size);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, cr_buf);
    }
    return rest_queue_response(req, c, MHD_HTTP_RANGE_NOT_SATISFIABLE, resp);
}

/* 200 with the whole file, or 206 with one range; streamed from fd (taken over). HEAD: MHD sends
 * the same headers (Content-Length included) and no body. */
static enum MHD_Result queue_body(rest_request *req, struct MHD_Connection *c, int fd,
                                  const rest_range *rg, int64_t size, const char *lm)
{
    int64_t start = rg ? rg->start : 0, len = rg ? rg->length : size;
    struct MHD_Response *resp;
    if (len == 0) {
        close(fd);
        resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    } else {
        resp = MHD_create_response_from_fd_at_offset64((uint64_t)len, fd, (uint64_t)start);
        if (!resp)
            close(fd);
    }
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_LAST_MODIFIED, lm);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
    if (rg) {
        char cr_buf[96];
        snprintf(cr_buf, sizeof(cr_buf), "bytes %" PRId64 "-%" PRId64 "/%" PRId64, start,
                 start + len - 1, size);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, cr_buf);
    }
    return rest_queue_response(req, c, rg ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, resp);
}

/* 206 multipart/byteranges for several ranges; fd taken over. */
static enum MHD_Result queue_multi(rest_request *req, struct MHD_Connection *c, int fd,
                                   const rest_range *ranges, size_t n, int64_t size, const char *lm)
{
    _cleanup_free_ char *ct = NULL;
    struct MHD_Response *resp = rest_byteranges_response(fd, ranges, n, size, &ct);
    if (!resp) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ct);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_LAST_MODIFIED, lm);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
    return rest_queue_response(req, c, MHD_HTTP_PARTIAL_CONTENT, resp);
}

static enum MHD_Result serve_file(rest_request *req, struct MHD_Connection *c, int fd,
                                  const struct stat *st, bool head)
{
    char lm[64];
    rest_http_date_format(st->st_mtim.tv_sec, lm, sizeof(lm));
    const char *range = header(c, MHD_HTTP_HEADER_RANGE);
    bool use_range;
    rest_cond_result cr = rest_check_preconditions(
        true, st->st_mtim.tv_sec, header(c, MHD_HTTP_HEADER_IF_MATCH),
        header(c, MHD_HTTP_HEADER_IF_UNMODIFIED_SINCE), header(c, MHD_HTTP_HEADER_IF_NONE_MATCH),
        header(c, MHD_HTTP_HEADER_IF_MODIFIED_SINCE), range, header(c, MHD_HTTP_HEADER_IF_RANGE),
        &use_range);
    if (cr != COND_PROCEED) {
        close(fd);
        return queue_empty(
            req, c, cr == COND_NOT_MODIFIED ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_PRECONDITION_FAILED,
            cr == COND_NOT_MODIFIED ? lm : NULL);
    }
    int64_t size = S_ISREG(st->st_mode) ? (int64_t)st->st_size : 0;
    rest_range *ranges = NULL;
    size_t n = 0;
    rest_range_result rr = use_range ? rest_range_parse_all(range, size, &ranges, &n) : RANGE_NONE;
    enum MHD_Result m;
    if (rr == RANGE_NO_OVERLAP || rr == RANGE_INVALID) {
        close(fd);
        m = queue_range_error(req, c, rr, size);
    } else if (rr == RANGE_MULTI)
        m = queue_multi(req, c, fd, ranges, n, size, lm);
    else
        m = queue_body(req, c, fd, rr == RANGE_SINGLE ? &ranges[0] : NULL, size, lm);
    free(ranges);
    return m;
}

enum MHD_Result rest_handle_get(rest_request *req, struct MHD_Connection *c, bool head)
{
    sandboxd *sd = req->srv->sd;
    confined t = CONFINED_INIT;
    api_error e = API_ERROR_INIT;
    int r = confine_resolve(sd->root_fd, sd->root_path, req->file_path, &t);
    if (r < 0) {
        rest_confine_error(&e, r);
        enum MHD_Result m = rest_queue_api_error(req, c, &e);
        api_error_clear(&e);
        return m;
    }
    int fd = -1;
    if (t.missing[0])
        r = -ENOENT;
    else {
        fd = openat(t.dir_fd, t.name[0] ? t.name : ".",
                    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        r = fd < 0 ? negative_errno() : 0;
        if (r == -ELOOP)
            r = -ENOENT; /* the confined target is a dangling symlink */
    }
    confined_done(&t);
    struct stat st;
    if (r == 0 && fstat(fd, &st) < 0)
        r = negative_errno();
    if (r < 0) {
        safe_close(fd);
        if (r == -ENOENT)
            return rest_queue_error(req, c, STATUS_NOT_FOUND, MSG_NOT_FOUND);
        if (r == -EACCES || r == -EPERM)
            return rest_queue_error(req, c, STATUS_PERMISSION_DENIED, MSG_DENIED);
        return rest_queue_error(req, c, STATUS_INTERNAL, strerror(-r));
    }
    if (S_ISDIR(st.st_mode))
        return list_dir(req, c, fd);
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return serve_file(req, c, fd, &st, head);
}
