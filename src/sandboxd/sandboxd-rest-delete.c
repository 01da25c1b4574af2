/* DELETE /v1/files/{path}: unlink/rmdir, or rm -rf on directory fds (never following symlinks). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/confine.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "sandboxd/sandboxd-rest-internal.h"

#define MSG_ROOT "cannot delete the sandbox root; pass recursive=true to clear its contents"
#define MSG_NOT_EMPTY "directory is not empty; pass recursive=true to remove it"

static int remove_tree_at(int dir_fd, const char *name);

/* Removes every entry of the directory open as `fd` (borrowed). */
static int remove_children(int fd)
{
    for (unsigned pass = 0; pass < 16; pass++) {
        int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            return negative_errno();
        DIR *d = fdopendir(dfd);
        if (!d) {
            close(dfd);
            return negative_errno();
        }
        bool any = false;
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            any = true;
            r = remove_tree_at(fd, de->d_name);
            if (r < 0)
                break;
        }
        closedir(d);
        if (r < 0)
            return r;
        if (!any)
            return 0;
    }
    return -ENOTEMPTY;
}

/* rm -rf of `name` inside `dir_fd`, never following symlinks. A missing entry is success. */
static int remove_tree_at(int dir_fd, const char *name)
{
    if (unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return negative_errno();
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : negative_errno();
    int r = remove_children(fd);
    close(fd);
    if (r < 0)
        return r;
    if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return negative_errno();
    return 0;
}

static enum MHD_Result queue_errno(rest_request *req, struct MHD_Connection *c, int r)
{
    if (r == -ENOTEMPTY || r == -EEXIST)
        return rest_queue_error(req, c, STATUS_CONFLICT, MSG_NOT_EMPTY);
    if (r == -EACCES || r == -EPERM)
        return rest_queue_error(req, c, STATUS_PERMISSION_DENIED, MSG_DENIED);
    if (r == -ENOENT)
        return rest_queue_error(req, c, STATUS_NOT_FOUND, MSG_NOT_FOUND);
    return rest_queue_error(req, c, STATUS_INTERNAL, strerror(-r));
}

static enum MHD_Result queue_no_content(rest_request *req, struct MHD_Connection *c)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    return rest_queue_response(req, c, MHD_HTTP_NO_CONTENT, resp);
}

static enum MHD_Result do_delete(rest_request *req, struct MHD_Connection *c, confined *t)
{
    struct stat st;
    if (t->missing[0] ||
        fstatat(t->dir_fd, t->name, &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0) {
        int r = t->missing[0] ? -ENOENT : negative_errno();
        if (r == -ENOENT)
            return rest_queue_error(req, c, STATUS_NOT_FOUND, MSG_NOT_FOUND);
        return rest_queue_error(req, c, STATUS_INTERNAL, strerror(-r));
    }
    _cleanup_free_ char *rv = NULL;
    if (rest_query_get(req->query, "recursive", &rv) < 0)
        return MHD_NO;
    bool recursive = false;
    if (rv && *rv && parse_go_bool(rv, &recursive) < 0) {
        api_error e = API_ERROR_INIT;
        api_error_set(&e, STATUS_INVALID_ARGUMENT, "recursive \"%s\" must be a boolean", rv);
        enum MHD_Result m = rest_queue_api_error(req, c, &e);
        api_error_clear(&e);
        return m;
    }
    int r;
    if (t->name[0] == '\0') {
        if (!recursive)
            return rest_queue_error(req, c, STATUS_CONFLICT, MSG_ROOT);
        int fd = openat(t->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return queue_errno(req, c, negative_errno());
        r = remove_children(fd);
        close(fd);
    } else if (recursive)
        r = remove_tree_at(t->dir_fd, t->name);
    else
        r = RET_NERRNO(unlinkat(t->dir_fd, t->name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0));
    if (r < 0)
        return queue_errno(req, c, r);
    return queue_no_content(req, c);
}

enum MHD_Result rest_handle_delete(rest_request *req, struct MHD_Connection *c)
{
    sandboxd *sd = req->srv->sd;
    confined t = CONFINED_INIT;
    int r = confine_resolve(sd->root_fd, sd->root_path, req->file_path, &t);
    if (r < 0) {
        api_error e = API_ERROR_INIT;
        rest_confine_error(&e, r);
        enum MHD_Result m = rest_queue_api_error(req, c, &e);
        api_error_clear(&e);
        return m;
    }
    enum MHD_Result m = do_delete(req, c, &t);
    confined_done(&t);
    return m;
}
