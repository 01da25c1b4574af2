/* PUT /v1/files/{path}: atomic write. The body (raw, or the "file" part of a multipart form) is
 * streamed into `.sandboxd-tmp-<random>` next to the target, fsync'd and renamed over it. The
 * temp file is removed whenever the request ends without the rename (errors, disconnects). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/confine.h"
#include "basic/io-util.h"
#include "basic/macro.h"
#include "sandboxd/sandboxd-rest-internal.h"

struct rest_put {
    confined target;
    mode_t mode;
    int parent_fd; /* directory holding the target once parents exist */
    int tmp_fd;
    char tmp_name[40];  /* ".sandboxd-tmp-" + 16 hex; "" when no temp file exists */
    rest_multipart *mp; /* NULL for a raw body */
    api_error err;      /* first failure; the rest of the body is discarded */
};

int rest_parse_mode(const char *s, mode_t *ret)
{
    if (strlen(s) != 4 || s[0] != '0')
        return -EINVAL;
    mode_t m = 0;
    for (int i = 1; i < 4; i++) {
        if (s[i] < '0' || s[i] > '7')
            return -EINVAL;
        m = m * 8 + (mode_t)(s[i] - '0');
    }
    *ret = m;
    return 0;
}

void rest_put_free(rest_put *p)
{
    if (!p)
        return;
    rest_multipart_free(p->mp);
    p->tmp_fd = safe_close(p->tmp_fd);
    if (p->tmp_name[0] && p->parent_fd >= 0)
        unlinkat(p->parent_fd, p->tmp_name, 0);
    safe_close(p->parent_fd);
    confined_done(&p->target);
    api_error_clear(&p->err);
    free(p);
}

static int put_fail(rest_put *p, int r, const char *what)
{
    if (p->err.code != STATUS_OK)
        return -1;
    if (r == -EACCES || r == -EPERM)
        return api_error_set(&p->err, STATUS_PERMISSION_DENIED, MSG_DENIED);
    return api_error_set(&p->err, STATUS_INTERNAL, "%s: %s", what, strerror(-r));
}

/* mkdir -p of target.missing below target.dir_fd (on dir fds), then the temp file. */
static int put_open_temp(rest_put *p)
{
    int fd = fcntl(p->target.dir_fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return put_fail(p, negative_errno(), "failed to create parent directory");
    _cleanup_free_ char *missing = strdup(p->target.missing);
    if (!missing) {
        close(fd);
        return put_fail(p, -ENOMEM, "failed to create parent directory");
    }
    for (char *save = NULL, *c = strtok_r(missing, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST) {
            int r = negative_errno();
            close(fd);
            return put_fail(p, r, "failed to create parent directory");
        }
        int nfd = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r = negative_errno();
        close(fd);
        if (nfd < 0)
            return put_fail(p, r == -ELOOP ? -ENOTDIR : r, "failed to create parent directory");
        fd = nfd;
    }
    p->parent_fd = fd;
    for (int attempt = 0; attempt < 16; attempt++) {
        unsigned char rnd[8];
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
            return put_fail(p, negative_errno(), "failed to create temp file");
        snprintf(p->tmp_name, sizeof(p->tmp_name), ".sandboxd-tmp-%02x%02x%02x%02x%02x%02x%02x%02x",
                 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        p->tmp_fd =
            openat(fd, p->tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (p->tmp_fd >= 0)
            break;
        int r = negative_errno();
        p->tmp_name[0] = '\0';
        if (r != -EEXIST)
            return put_fail(p, r, "failed to create temp file");
    }
    if (p->tmp_fd < 0)
        return put_fail(p, -EEXIST, "failed to create temp file");
    if (fchmod(p->tmp_fd, p->mode) < 0)
        return put_fail(p, negative_errno(), "failed to set file mode");
    return 0;
}

static int put_write(rest_put *p, const char *data, size_t size)
{
    int r = loop_write(p->tmp_fd, data, size);
    return r < 0 ? put_fail(p, r, "failed to write file") : 0;
}

static int multipart_sink(void *payload, const char *data, size_t size, bool first)
{
    rest_put *p = payload;
    if (p->err.code != STATUS_OK)
        return 0; /* keep parsing; the error is reported at the end */
    if (first && put_open_temp(p) < 0)
        return 0;
    if (size > 0)
        put_write(p, data, size);
    return 0;
}

static int put_commit(rest_put *p)
{
    if (fsync(p->tmp_fd) < 0)
        return put_fail(p, negative_errno(), "failed to sync file");
    int r = RET_NERRNO(close(p->tmp_fd));
    p->tmp_fd = -1;
    if (r < 0)
        return put_fail(p, r, "failed to close file");
    if (renameat(p->parent_fd, p->tmp_name, p->parent_fd, p->target.name) < 0)
        return put_fail(p, negative_errno(), "failed to rename file");
    p->tmp_name[0] = '\0';
    return 0;
}

/* Answers an error found before the upload started and drops the upload state (so that any
 * body libmicrohttpd still hands us is discarded). */
static enum MHD_Result begin_failed(rest_request *req, struct MHD_Connection *c, rest_put *p,
                                    api_error *e)
{
    enum MHD_Result m = rest_queue_api_error(req, c, e);
    api_error_clear(e);
    rest_put_free(p);
    return m;
}

/* First call: validate in upstream's order and prepare the upload. */
static enum MHD_Result put_begin(rest_request *req, struct MHD_Connection *c)
{
    sandboxd *sd = req->srv->sd;
    api_error e = API_ERROR_INIT;
    _cleanup_free_ char *mode_s = NULL;
    mode_t mode = 0644;
    if (rest_query_get(req->query, "mode", &mode_s) < 0)
        return MHD_NO;
    if (mode_s && *mode_s && rest_parse_mode(mode_s, &mode) < 0) {
        api_error_set(&e, STATUS_INVALID_ARGUMENT, "mode \"%s\" must match ^0[0-7]{3}$", mode_s);
        return begin_failed(req, c, NULL, &e);
    }
    rest_put *p = calloc(1, sizeof(*p));
    if (!p)
        return MHD_NO;
    *p = (rest_put){.target = CONFINED_INIT,
                    .mode = mode,
                    .parent_fd = -1,
                    .tmp_fd = -1,
                    .err = API_ERROR_INIT};
    int r = confine_resolve(sd->root_fd, sd->root_path, req->file_path, &p->target);
    if (r < 0) {
        rest_confine_error(&e, r);
        return begin_failed(req, c, p, &e);
    }
    struct stat st;
    if (!p->target.missing[0] &&
        fstatat(p->target.dir_fd, p->target.name, &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) == 0 &&
        S_ISDIR(st.st_mode)) {
        api_error_set(&e, STATUS_INVALID_ARGUMENT, "target path is a directory");
        return begin_failed(req, c, p, &e);
    }
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (rest_is_multipart_form(ct)) {
        p->mp = rest_multipart_new(c, multipart_sink, p, &e);
        if (!p->mp)
            return begin_failed(req, c, p, &e);
    } else if (put_open_temp(p) < 0) {
        e = p->err;
        p->err = (api_error)API_ERROR_INIT;
        return begin_failed(req, c, p, &e);
    }
    req->put = p;
    return MHD_YES;
}

enum MHD_Result rest_handle_put(rest_request *req, struct MHD_Connection *c, const char *data,
                                size_t *data_size)
{
    if (!req->put)
        return put_begin(req, c);
    rest_put *p = req->put;
    if (*data_size > 0) {
        size_t n = *data_size;
        *data_size = 0;
        if (p->err.code != STATUS_OK)
            return MHD_YES; /* discard the rest of the body */
        if (p->mp) {
            api_error e = API_ERROR_INIT;
            if (rest_multipart_feed(p->mp, data, n, &e) < 0 && p->err.code == STATUS_OK) {
                p->err = e;
                e = (api_error)API_ERROR_INIT;
            }
            api_error_clear(&e);
        } else
            put_write(p, data, n);
        return MHD_YES;
    }
    /* End of body. */
    if (p->err.code == STATUS_OK && p->mp) {
        api_error e = API_ERROR_INIT;
        if (rest_multipart_finish(p->mp, &e) < 0 && p->err.code == STATUS_OK) {
            p->err = e;
            e = (api_error)API_ERROR_INIT;
        }
        api_error_clear(&e);
    }
    if (p->err.code == STATUS_OK)
        put_commit(p);
    if (p->err.code != STATUS_OK)
        return rest_queue_api_error(req, c, &p->err);
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    return rest_queue_response(req, c, MHD_HTTP_NO_CONTENT, resp);
}
