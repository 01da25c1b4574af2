/* multipart/form-data bodies through libmicrohttpd's post processor and our "file" part state
 * machine (sandboxd-rest-multipart.c). Input: boundary line, then the body. Requests are fed to an
 * in-process MHD daemon over a socketpair (MHD_add_connection). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandboxd/sandboxd-rest-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fuzz_req {
    rest_multipart *mp;
    api_error err;
    bool failed;
    unsigned firsts;
    size_t bytes;
} fuzz_req;

static int sink(void *payload, const char *data, size_t size, bool first)
{
    fuzz_req *r = payload;
    if (first)
        r->firsts++;
    if (r->firsts != 1)
        abort(); /* data before the part started, or a second "file" part streamed */
    if (size > 0 && !data)
        abort();
    r->bytes += size;
    return 0;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    fuzz_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof(*r));
        if (!r)
            return MHD_NO;
        *con_cls = r;
        r->mp = rest_multipart_new(c, sink, r, &r->err);
        r->failed = !r->mp;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!r->failed && rest_multipart_feed(r->mp, upload, *upload_size, &r->err) < 0)
            r->failed = true;
        *upload_size = 0;
        return MHD_YES;
    }
    if (!r->failed && rest_multipart_finish(r->mp, &r->err) < 0)
        r->failed = true;
    return rest_queue_error(NULL, c, r->failed ? r->err.code : STATUS_OK,
                            r->failed ? r->err.message : "ok");
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    fuzz_req *r = *con_cls;
    if (!r)
        return;
    rest_multipart_free(r->mp);
    api_error_clear(&r->err);
    free(r);
    *con_cls = NULL;
}

static struct MHD_Daemon *daemon_;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!daemon_) {
        daemon_ = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_POLL,
            0, NULL, NULL, on_access, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)5, MHD_OPTION_END);
        if (!daemon_)
            abort();
    }
    const char *nl = memchr(data, '\n', size);
    size_t blen = nl ? (size_t)(nl - (const char *)data) : 0;
    const char *body = nl ? nl + 1 : (const char *)data;
    size_t body_len = size - (nl ? blen + 1 : 0);
    char *boundary = strndup((const char *)data, blen);
    if (!boundary)
        return 0;
    for (char *p = boundary; *p; p++)
        if (*p == '\r' || *p == '\n' || *p == '\0')
            *p = '_';
    char *head = NULL;
    int hl =
        asprintf(&head,
                 "PUT /v1/files/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                 "Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %zu\r\n\r\n",
                 boundary, body_len);
    free(boundary);
    if (hl < 0)
        return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    int sz = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (MHD_add_connection(daemon_, sv[0], (struct sockaddr *)&sa, sizeof(sa_family_t)) !=
        MHD_YES) {
        close(sv[1]);
        free(head);
        return 0;
    }
    if (write(sv[1], head, (size_t)hl) < 0 || (body_len && write(sv[1], body, body_len) < 0)) {
    }
    free(head);
    shutdown(sv[1], SHUT_WR);
    char drain[4096];
    while (read(sv[1], drain, sizeof(drain)) > 0) {
    }
    close(sv[1]);
    return 0;
}
