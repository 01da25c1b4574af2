/* JSON output equivalent to Go's json.Encoder (compact, trailing newline, HTML-safe escaping,
 * invalid UTF-8 as U+FFFD), the error body, and the response-queueing helpers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "sandboxd/sandboxd-rest-internal.h"

void json_buf_raw(json_buf *b, const char *s, size_t n)
{
    if (!b->oom && buf_append(&b->text, s, n) < 0)
        b->oom = true;
}

void json_buf_lit(json_buf *b, const char *s)
{
    json_buf_raw(b, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s (Go utf8.DecodeRune rules), or 0 if invalid. */
static size_t utf8_valid_len(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        *ret_cp = c;
        return 1;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    uint32_t cp = c & (0xFF >> (len + 1));
    for (size_t i = 1; i < len; i++)
        cp = (cp << 6) | (s[i] & 0x3F);
    *ret_cp = cp;
    return len;
}

void json_buf_string(json_buf *b, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    json_buf_raw(b, "\"", 1);
    size_t start = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = utf8_valid_len(s + i, n - i, &cp);
        const char *esc = NULL;
        char ubuf[7];
        if (l == 1) {
            unsigned char c = s[i];
            if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&') {
                i++;
                continue;
            }
            if (c == '"')
                esc = "\\\"";
            else if (c == '\\')
                esc = "\\\\";
            else if (c == '\n')
                esc = "\\n";
            else if (c == '\r')
                esc = "\\r";
            else if (c == '\t')
                esc = "\\t";
            else {
                snprintf(ubuf, sizeof(ubuf), "\\u00%c%c", hex[c >> 4], hex[c & 0xF]);
                esc = ubuf;
            }
        } else if (l == 0) {
            esc = "\\ufffd";
            l = 1;
        } else if (cp == 0x2028 || cp == 0x2029) {
            esc = cp == 0x2028 ? "\\u2028" : "\\u2029";
        } else {
            i += l;
            continue;
        }
        json_buf_raw(b, str + start, i - start);
        json_buf_lit(b, esc);
        i += l;
        start = i;
    }
    json_buf_raw(b, str + start, n - start);
    json_buf_raw(b, "\"", 1);
}

char *json_buf_steal(json_buf *b, size_t *ret_len)
{
    if (b->oom || !b->text.data) {
        json_buf_done(b);
        return NULL;
    }
    return buf_steal(&b->text, ret_len);
}

void json_buf_done(json_buf *b)
{
    buf_done(&b->text);
    b->oom = false;
}

char *rest_error_body(status_code code, const char *message, size_t *ret_len)
{
    json_buf b = {0};
    json_buf_lit(&b, "{\"code\":");
    const char *name = status_name(code);
    json_buf_string(&b, name, strlen(name));
    json_buf_lit(&b, ",\"message\":");
    if (!message)
        message = "";
    json_buf_string(&b, message, strlen(message));
    json_buf_lit(&b, "}\n");
    return json_buf_steal(&b, ret_len);
}

enum MHD_Result rest_queue_response(rest_request *req, struct MHD_Connection *c, unsigned status,
                                    struct MHD_Response *resp)
{
    if (!resp)
        return MHD_NO;
    if (req && atomic_load(&req->srv->stopping))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result r = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return r;
}

enum MHD_Result rest_queue_buffer(rest_request *req, struct MHD_Connection *c, unsigned status,
                                  const char *content_type, char *body, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    return rest_queue_response(req, c, status, resp);
}

enum MHD_Result rest_queue_json(rest_request *req, struct MHD_Connection *c, unsigned status,
                                json_buf *b)
{
    size_t len = 0;
    char *body = json_buf_steal(b, &len);
    if (!body)
        return MHD_NO;
    return rest_queue_buffer(req, c, status, "application/json", body, len);
}

enum MHD_Result rest_queue_text(rest_request *req, struct MHD_Connection *c, unsigned status,
                                const char *text)
{
    /* As Go's http.Error. */
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    return rest_queue_response(req, c, status, resp);
}

enum MHD_Result rest_queue_error(rest_request *req, struct MHD_Connection *c, status_code code,
                                 const char *message)
{
    size_t len = 0;
    char *body = rest_error_body(code, message, &len);
    if (!body)
        return MHD_NO;
    return rest_queue_buffer(req, c, status_http(code), "application/json", body, len);
}

enum MHD_Result rest_queue_api_error(rest_request *req, struct MHD_Connection *c,
                                     const api_error *e)
{
    return rest_queue_error(req, c, e->code == STATUS_OK ? STATUS_INTERNAL : e->code,
                            e->message ? e->message : "out of memory");
}

void rest_confine_error(api_error *e, int r)
{
    if (r == -ERRNO_PATH_ESCAPE)
        api_error_set(e, STATUS_PERMISSION_DENIED, MSG_ESCAPE);
    else
        api_error_set(e, STATUS_INTERNAL, "%s", strerror(-r));
}
