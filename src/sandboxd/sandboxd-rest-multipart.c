/* multipart/form-data bodies: streams the first part named "file" to a sink through
 * libmicrohttpd's post processor (fuzzed by fuzz/fuzz-multipart.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sandboxd/sandboxd-rest-internal.h"

#define POST_BUFFER_SIZE (64 * 1024)

typedef enum { PART_BEFORE, PART_IN_FILE, PART_AFTER } part_state;

struct rest_multipart {
    struct MHD_PostProcessor *pp;
    rest_multipart_sink sink;
    void *payload;
    part_state state;
    int sink_error;
    bool saw_file;
};

bool rest_is_multipart_form(const char *ct)
{
    if (!ct)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    static const char mt[] = "multipart/form-data";
    if (strncasecmp(ct, mt, strlen(mt)) != 0)
        return false;
    char c = ct[strlen(mt)];
    return c == '\0' || c == ';' || c == ' ' || c == '\t';
}

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *content_type,
                               const char *transfer_encoding, const char *data, uint64_t off,
                               size_t size)
{
    rest_multipart *m = cls;
    bool is_file = key && strcmp(key, "file") == 0;
    if (m->state == PART_IN_FILE && (!is_file || off == 0))
        m->state = PART_AFTER;
    if (m->state == PART_BEFORE && is_file && off == 0) {
        m->state = PART_IN_FILE;
        m->saw_file = true;
        int r = m->sink(m->payload, data, size, true);
        if (r < 0) {
            m->sink_error = r;
            return MHD_NO;
        }
        return MHD_YES;
    }
    if (m->state == PART_IN_FILE && size > 0) {
        int r = m->sink(m->payload, data, size, false);
        if (r < 0) {
            m->sink_error = r;
            return MHD_NO;
        }
    }
    return MHD_YES;
}

rest_multipart *rest_multipart_new(struct MHD_Connection *c, rest_multipart_sink sink,
                                   void *payload, api_error *err)
{
    rest_multipart *m = calloc(1, sizeof(*m));
    if (!m) {
        api_error_set(err, STATUS_INTERNAL, "out of memory");
        return NULL;
    }
    m->sink = sink;
    m->payload = payload;
    m->pp = MHD_create_post_processor(c, POST_BUFFER_SIZE, on_part, m);
    if (!m->pp) {
        free(m);
        api_error_set(err, STATUS_INVALID_ARGUMENT,
                      "invalid multipart body: no multipart boundary param in Content-Type");
        return NULL;
    }
    return m;
}

int rest_multipart_feed(rest_multipart *m, const char *data, size_t size, api_error *err)
{
    if (size == 0)
        return 0;
    if (MHD_post_process(m->pp, data, size) != MHD_YES) {
        if (m->sink_error)
            return api_error_set(err, STATUS_INTERNAL, "%s", strerror(-m->sink_error));
        return api_error_set(err, STATUS_INVALID_ARGUMENT,
                             "invalid multipart body: malformed part");
    }
    return 0;
}

int rest_multipart_finish(rest_multipart *m, api_error *err)
{
    enum MHD_Result ok = MHD_destroy_post_processor(m->pp);
    m->pp = NULL;
    if (m->sink_error)
        return api_error_set(err, STATUS_INTERNAL, "%s", strerror(-m->sink_error));
    if (ok != MHD_YES)
        return api_error_set(err, STATUS_INVALID_ARGUMENT,
                             "invalid multipart body: unexpected EOF");
    if (!m->saw_file)
        return api_error_set(err, STATUS_INVALID_ARGUMENT,
                             "multipart body is missing the required \"file\" part");
    return 0;
}

int rest_multipart_sink_error(rest_multipart *m)
{
    return m->sink_error;
}

rest_multipart *rest_multipart_free(rest_multipart *m)
{
    if (!m)
        return NULL;
    if (m->pp)
        MHD_destroy_post_processor(m->pp);
    free(m);
    return NULL;
}
