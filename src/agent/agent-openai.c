/* Minimal OpenAI-compatible chat-completions client (libcurl + jansson). See agent-internal.h. */
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent-internal.h"
#include "basic/buf.h"
#include "basic/macro.h"

#define HTTP_TIMEOUT_S 60L
#define MAX_ATTEMPTS 5

struct agent_openai {
    char *url;
    char *auth;
    char *model;
    long retry_base_ms;
};

static unsigned long id_counter;

/* Gemini sometimes sends "" as a tool call id: generate one so the tool message can refer to it. */
static int fix_tool_call_ids(json_t *msg)
{
    json_t *calls = json_object_get(msg, "tool_calls"), *c;
    size_t i;
    if (!calls)
        return 0;
    if (!json_is_array(calls))
        return -EBADMSG;
    json_array_foreach(calls, i, c)
    {
        if (!json_is_object(c))
            return -EBADMSG;
        json_t *fn = json_object_get(c, "function");
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
            return -EBADMSG;
        json_t *args = json_object_get(fn, "arguments");
        if (!args || json_is_null(args))
            json_object_set_new(fn, "arguments", json_string("{}"));
        else if (!json_is_string(args)) {
            /* Some servers send an object: keep it as the JSON text the protocol promises. */
            char *s = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
            if (!s)
                return -ENOMEM;
            json_object_set_new(fn, "arguments", json_string(s));
            free(s);
        }
        const char *id = json_string_value(json_object_get(c, "id"));
        if (!id || !*id) {
            char gen[64];
            snprintf(gen, sizeof(gen), "call_%lx_%lu_%zu", (unsigned long)time(NULL),
                     __atomic_add_fetch(&id_counter, 1, __ATOMIC_RELAXED), i);
            json_object_set_new(c, "id", json_string(gen));
        }
        if (!json_object_get(c, "type"))
            json_object_set_new(c, "type", json_string("function"));
    }
    return 0;
}

int agent_openai_parse_response(const char *body, size_t len, json_t **ret_message,
                                char **ret_finish, api_error *err)
{
    *ret_message = NULL;
    if (ret_finish)
        *ret_finish = NULL;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!root)
        return api_error_set_errno(err, -EBADMSG, "llm: invalid JSON in response: %s", jerr.text);
    int r;
    json_t *eobj = json_object_get(root, "error");
    if (eobj) {
        const char *m = json_string_value(json_object_get(eobj, "message"));
        r = api_error_set_errno(err, -EPROTO, "llm: api error: %s", m ? m : "(no message)");
        goto out;
    }
    json_t *choices = json_object_get(root, "choices");
    if (!json_is_array(choices) || json_array_size(choices) == 0) {
        r = api_error_set_errno(err, -EBADMSG, "llm: no choices in response");
        goto out;
    }
    json_t *choice = json_array_get(choices, 0);
    json_t *msg = json_object_get(choice, "message");
    if (!json_is_object(msg)) {
        r = api_error_set_errno(err, -EBADMSG, "llm: choices[0].message is missing");
        goto out;
    }
    json_t *content = json_object_get(msg, "content");
    if (content && !json_is_string(content) && !json_is_null(content)) {
        r = api_error_set_errno(err, -EBADMSG, "llm: message content is not a string");
        goto out;
    }
    msg = json_deep_copy(msg);
    if (!msg) {
        r = -ENOMEM;
        goto out;
    }
    r = fix_tool_call_ids(msg);
    if (r < 0) {
        json_decref(msg);
        r = api_error_set_errno(err, r, "llm: malformed tool_calls in response");
        goto out;
    }
    if (!json_object_get(msg, "role"))
        json_object_set_new(msg, "role", json_string("assistant"));
    const char *fin = json_string_value(json_object_get(choice, "finish_reason"));
    if (ret_finish && fin)
        *ret_finish = strdup(fin);
    *ret_message = msg;
    r = 0;
out:
    json_decref(root);
    return r;
}

char *agent_openai_error_text(long status, const char *body, size_t len)
{
    char *out = NULL;
    json_t *root = json_loadb(body ? body : "", len, JSON_DECODE_ANY, NULL);
    json_t *obj = root;
    if (json_is_array(obj)) /* Gemini: [{"error":{...}}] */
        obj = json_array_get(obj, 0);
    json_t *err = json_object_get(obj, "error");
    const char *msg = json_string_value(json_object_get(err, "message"));
    if (msg) {
        const char *type = json_string_value(json_object_get(err, "type"));
        if (!type)
            type = json_string_value(json_object_get(err, "status"));
        const char *code = json_string_value(json_object_get(err, "code"));
        if (asprintf(&out, "llm: api error (status %ld): %s%s%s%s%s", status, msg,
                     type || code ? " (" : "", type ? type : "", type && code ? ", " : "",
                     code ? code : "") < 0)
            out = NULL;
        else if (type || code) {
            char *o2 = NULL;
            if (asprintf(&o2, "%s)", out) >= 0) {
                free(out);
                out = o2;
            }
        }
    } else if (asprintf(&out, "llm: api error (status %ld): %.*s", status, (int)MIN(len, 4096),
                        body ? body : "") < 0)
        out = NULL;
    json_decref(root);
    return out;
}

agent_openai *agent_openai_new(const char *base_url, const char *api_key, const char *model)
{
    agent_openai *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    const char *base = base_url && *base_url ? base_url : AGENT_DEFAULT_BASE_URL;
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/')
        n--;
    if (asprintf(&c->url, "%.*s/chat/completions", (int)n, base) < 0)
        c->url = NULL;
    if (asprintf(&c->auth, "Authorization: Bearer %s", api_key ? api_key : "") < 0)
        c->auth = NULL;
    c->model = strdup(model ? model : AGENT_DEFAULT_MODEL);
    const char *b = getenv("AGENT_RETRY_BASE_MS");
    c->retry_base_ms = b ? atol(b) : 500;
    if (!c->url || !c->auth || !c->model)
        return agent_openai_free(c);
    return c;
}

agent_openai *agent_openai_free(agent_openai *c)
{
    if (c) {
        free(c->url);
        free(c->auth);
        free(c->model);
        free(c);
    }
    return NULL;
}

/* curl write callback into the buf at ud; a reply over 64 MiB (or ENOMEM) fails the transfer. */
static size_t write_cb(char *p, size_t sz, size_t n, void *ud)
{
    buf *b = ud;
    size_t add = sz * n;
    if (b->len + add > (64u << 20) || buf_append(b, p, add) < 0)
        return 0;
    return add;
}

static int progress_cb(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    const volatile int *cancel = ud;
    return cancel && *cancel ? 1 : 0;
}

static size_t header_cb(char *p, size_t sz, size_t n, void *ud)
{
    long *ra = ud;
    size_t len = sz * n;
    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        long s = atol(p + 12);
        if (s > 0 && s < 120)
            *ra = s * 1000;
    }
    return len;
}

static bool sleep_cancellable(long ms, const volatile int *cancel)
{
    while (ms > 0) {
        if (cancel && *cancel)
            return false;
        long step = MIN(ms, 50);
        usleep((useconds_t)step * 1000);
        ms -= step;
    }
    return !(cancel && *cancel);
}

int agent_openai_chat(agent_openai *c, json_t *messages, json_t *tools, const volatile int *cancel,
                      agent_log_cb log_cb, void *log_payload, json_t **ret_message,
                      char **ret_finish, api_error *err)
{
    *ret_message = NULL;
    json_t *req = json_pack("{s:s, s:O}", "model", c->model, "messages", messages);
    if (!req)
        return -ENOMEM;
    if (tools && json_array_size(tools) > 0)
        json_object_set(req, "tools", tools);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!body)
        return -ENOMEM;

    int r = -EIO;
    long delay = c->retry_base_ms;
    for (int attempt = 1;; attempt++) {
        CURL *h = curl_easy_init();
        if (!h) {
            r = -ENOMEM;
            break;
        }
        buf resp = BUF_INIT;
        long ra = 0;
        struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
        hl = curl_slist_append(hl, c->auth);
        curl_easy_setopt(h, CURLOPT_URL, c->url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, HTTP_TIMEOUT_S);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &ra);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)cancel);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        CURLcode cc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hl);
        curl_easy_cleanup(h);

        bool retry = false;
        if (cc == CURLE_ABORTED_BY_CALLBACK || (cancel && *cancel)) {
            r = -ECANCELED;
        } else if (cc != CURLE_OK) {
            r = api_error_set_errno(err, -EIO, "llm: request to %s failed: %s", c->url,
                                    curl_easy_strerror(cc));
            retry = cc == CURLE_COULDNT_CONNECT || cc == CURLE_RECV_ERROR ||
                    cc == CURLE_SEND_ERROR || cc == CURLE_GOT_NOTHING ||
                    cc == CURLE_OPERATION_TIMEDOUT;
        } else if (status < 200 || status > 299) {
            char *t = agent_openai_error_text(status, resp.data, resp.len);
            r = api_error_set_errno(err, -EIO, "%s", t ? t : "llm: api error");
            free(t);
            retry = status == 429 || status >= 500;
        } else {
            r = agent_openai_parse_response(resp.data ? resp.data : "", resp.len, ret_message,
                                            ret_finish, err);
        }
        buf_done(&resp);
        if (!retry || attempt >= MAX_ATTEMPTS)
            break;
        long wait = ra > 0 ? ra : delay;
        if (log_cb) {
            char *m = NULL;
            if (asprintf(&m, "%s; retrying in %ld ms (attempt %d of %d)",
                         err->message ? err->message : "llm: request failed", wait, attempt + 1,
                         MAX_ATTEMPTS) >= 0) {
                log_cb(AGENT_LOG_WARNING, m, log_payload);
                free(m);
            }
        }
        if (!sleep_cancellable(wait, cancel)) {
            r = -ECANCELED;
            break;
        }
        delay = MIN(delay * 2, 8000);
    }
    free(body);
    return r;
}
