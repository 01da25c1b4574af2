/* The agent loop (agent-loop.h): sessions, one user turn at a time. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent-internal.h"
#include "agent/agent-loop.h"
#include "basic/macro.h"

#define DEFAULT_MAX_STEPS 50

struct agent_session {
    const agent_config *cfg;
    char *name;
    char *dir;
    const agent_toolset *toolset;
    json_t *history;
    json_t *tools;
    json_t *always; /* tool name -> true (allow) / false (reject) */
    agent_openai *llm;
    agent_box *box;
    int lock_fd; /* flock on <dir>/lock while the session lives (agent_store_lock) */
};

int agent_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int agent_config_from_env(agent_config *cfg, api_error *err)
{
    if (!cfg->model)
        cfg->model = env_nonempty("OPENAI_MODEL");
    if (!cfg->model)
        cfg->model = env_nonempty("MODEL");
    if (!cfg->model)
        cfg->model = AGENT_DEFAULT_MODEL;
    if (!cfg->base_url)
        cfg->base_url = env_nonempty("OPENAI_BASE_URL");
    if (!cfg->api_key)
        cfg->api_key = env_nonempty("GEMINI_API_KEY");
    if (!cfg->api_key)
        cfg->api_key = env_nonempty("OPENAI_API_KEY");
    if (!cfg->toolset)
        cfg->toolset = env_nonempty("TOOLSET");
    if (!cfg->image)
        cfg->image = env_nonempty("SANDBOX_IMAGE");
    if (!cfg->api_key && strcmp(cfg->model, AGENT_FAKE_MODEL) != 0)
        return api_error_set_errno(
            err, -EINVAL, "GEMINI_API_KEY or OPENAI_API_KEY environment variable is required");
    return 0;
}

int agent_session_name_generate(char **ret)
{
    unsigned char b[8];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, b, sizeof(b));
    close(fd);
    if (n != (ssize_t)sizeof(b))
        return -EIO;
    char *s = malloc(18);
    if (!s)
        return -ENOMEM;
    s[0] = 's';
    for (size_t i = 0; i < sizeof(b); i++)
        snprintf(s + 1 + 2 * i, 3, "%02x", b[i]);
    *ret = s;
    return 0;
}

const char *agent_stop_reason_name(agent_stop_reason r)
{
    switch (r) {
    case AGENT_STOP_END_TURN:
        return "end_turn";
    case AGENT_STOP_MAX_TOKENS:
        return "max_tokens";
    case AGENT_STOP_MAX_TURN_REQUESTS:
        return "max_turn_requests";
    case AGENT_STOP_REFUSAL:
        return "refusal";
    case AGENT_STOP_CANCELLED:
        return "cancelled";
    }
    return "end_turn";
}

static void slog(agent_session *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void slog(agent_session *s, int level, const char *fmt, ...)
{
    if (!s->cfg->log_cb)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) >= 0) {
        s->cfg->log_cb(level, m, s->cfg->log_payload);
        free(m);
    }
    va_end(ap);
}

/* Appends to the history and the store; takes the reference. */
static int record(agent_session *s, json_t *msg, api_error *err)
{
    if (!msg)
        return -ENOMEM;
    int r = agent_store_append(s->dir, msg, err);
    json_array_append_new(s->history, msg);
    return r;
}

int agent_session_new(agent_session **ret, const agent_config *cfg, const char *name,
                      api_error *err)
{
    *ret = NULL;
    if (!agent_session_name_valid(name))
        return api_error_set_errno(
            err, -EINVAL, "invalid session name \"%s\": use 1 to 40 characters of [a-z0-9]",
            name ? name : "");
    const agent_toolset *ts = agent_toolset_find(cfg->toolset);
    if (!ts)
        return api_error_set_errno(err, -EINVAL, "unknown toolset \"%s\" (known: basic, geminicli)",
                                   cfg->toolset);
    _cleanup_free_ char *fs = NULL;
    agent_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->lock_fd = -1;
    s->cfg = cfg;
    s->toolset = ts;
    s->name = strdup(name);
    s->tools = agent_toolset_tools(ts);
    s->always = json_object();
    int r = -ENOMEM;
    if (!s->name || !s->tools || !s->always)
        goto fail;
    r = agent_store_session_dir(cfg, name, &s->dir);
    if (r < 0) {
        r = api_error_set_errno(err, r, "cannot find the session directory (is HOME set?)");
        goto fail;
    }
    /* Before the history is read: two processes appending to one history interleave it into a
     * transcript no model endpoint accepts. */
    r = agent_store_lock(s->dir, name, &s->lock_fd, err);
    if (r < 0)
        goto fail;
    r = agent_store_load(s->dir, &s->history, err);
    if (r < 0)
        goto fail;
    if (json_array_size(s->history) == 0) {
        r = record(
            s,
            json_pack("{s:s, s:s}", "role", "system", "content", agent_toolset_system_prompt(ts)),
            err);
        if (r < 0)
            goto fail;
    }
    if (strcmp(cfg->model ? cfg->model : "", AGENT_FAKE_MODEL) != 0) {
        s->llm = agent_openai_new(cfg->base_url, cfg->api_key, cfg->model);
        if (!s->llm) {
            r = -ENOMEM;
            goto fail;
        }
    }
    if (asprintf(&fs, "%s/fs", s->dir) < 0) {
        r = -ENOMEM;
        goto fail;
    }
    r = agent_box_new(&s->box, cfg, name, cfg->image, fs, err);
    if (r < 0)
        goto fail;
    *ret = s;
    return 0;
fail:
    agent_session_free(s);
    return r;
}

agent_session *agent_session_free(agent_session *s)
{
    if (!s)
        return NULL;
    agent_box_free(s->box);
    agent_openai_free(s->llm);
    json_decref(s->history);
    json_decref(s->tools);
    json_decref(s->always);
    free(s->name);
    free(s->dir);
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    free(s);
    return NULL;
}

const char *agent_session_name(const agent_session *s)
{
    return s->name;
}
const char *agent_session_toolset(const agent_session *s)
{
    return agent_toolset_name(s->toolset);
}
const char *agent_session_sandbox(const agent_session *s)
{
    return agent_box_name(s->box);
}
size_t agent_session_history_length(const agent_session *s)
{
    return json_array_size(s->history);
}

static bool cancelled(const agent_callbacks *cbs)
{
    return cbs->cancel && *cbs->cancel;
}

static agent_stop_reason finish_reason(const char *f)
{
    if (f && strcmp(f, "length") == 0)
        return AGENT_STOP_MAX_TOKENS;
    if (f && strcmp(f, "content_filter") == 0)
        return AGENT_STOP_REFUSAL;
    return AGENT_STOP_END_TURN;
}

static void fill_call(agent_tool_call *c, json_t *tc, char **title)
{
    json_t *fn = json_object_get(tc, "function");
    c->id = json_string_value(json_object_get(tc, "id")) ?: "";
    c->name = json_string_value(json_object_get(fn, "name")) ?: "";
    c->arguments = json_string_value(json_object_get(fn, "arguments")) ?: "{}";
    *title = agent_toolset_title(c->name, c->arguments);
    c->title = *title ? *title : c->name;
    c->kind = agent_toolset_kind(c->name);
}

static agent_permission ask(agent_session *s, const agent_callbacks *cbs,
                            const agent_tool_call *c)
{
    json_t *a = json_object_get(s->always, c->name);
    if (a)
        return json_is_true(a) ? AGENT_PERMISSION_ALLOW_ONCE : AGENT_PERMISSION_REJECT_ONCE;
    if (!cbs->permission_cb)
        return AGENT_PERMISSION_ALLOW_ONCE;
    agent_permission p = cbs->permission_cb(c, cbs->payload);
    if (p == AGENT_PERMISSION_ALLOW_ALWAYS)
        json_object_set_new(s->always, c->name, json_true());
    else if (p == AGENT_PERMISSION_REJECT_ALWAYS)
        json_object_set_new(s->always, c->name, json_false());
    return p;
}

/* Runs the tool calls of one assistant message. Returns 0, -ECANCELED (every call still got its
 * tool message, so the history stays valid), or -errno from the store. */
static int run_calls(agent_session *s, json_t *calls, const agent_callbacks *cbs, api_error *err)
{
    bool stop = false;
    json_t *tc;
    size_t i;
    json_array_foreach(calls, i, tc)
    {
        agent_tool_call c;
        _cleanup_free_ char *title = NULL, *result = NULL;
        fill_call(&c, tc, &title);
        if (cbs->tool_call_cb)
            cbs->tool_call_cb(&c, cbs->payload);
        bool failed = true;
        if (!stop && cancelled(cbs))
            stop = true;
        agent_permission p = stop ? AGENT_PERMISSION_CANCELLED : ask(s, cbs, &c);
        if (p == AGENT_PERMISSION_CANCELLED || cancelled(cbs)) {
            stop = true;
            result = strdup("Tool call was cancelled by the user before it could complete.");
        } else if (p == AGENT_PERMISSION_REJECT_ONCE || p == AGENT_PERMISSION_REJECT_ALWAYS) {
            if (asprintf(&result, "Error calling tool \"%s\": the user rejected this tool call",
                         c.name) < 0)
                result = NULL;
        } else {
            if (cbs->version >= 2 && cbs->tool_start_cb)
                cbs->tool_start_cb(&c, cbs->payload);
            int r = agent_toolset_call(s->toolset, s->box, s->cfg, c.name, c.arguments,
                                       cbs->cancel, &result, &failed);
            if (r == -ECANCELED) {
                stop = true;
                free(result);
                result = strdup("Tool call was cancelled by the user before it could complete.");
                failed = true;
            } else if (r < 0) {
                free(result);
                if (asprintf(&result, "Error calling tool \"%s\": %s", c.name, strerror(-r)) < 0)
                    result = NULL;
                failed = true;
            }
        }
        if (!result)
            return -ENOMEM;
        int r = record(
            s,
            json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id", c.id, "content", result),
            err);
        if (r < 0)
            return r;
        if (cbs->tool_result_cb)
            cbs->tool_result_cb(&c, failed ? AGENT_TOOL_FAILED : AGENT_TOOL_COMPLETED, result,
                                cbs->payload);
    }
    return stop ? -ECANCELED : 0;
}

static void snapshot(agent_session *s)
{
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    if (agent_box_snapshot(s->box, &err) < 0)
        slog(s, AGENT_LOG_WARNING, "snapshot of the home directory failed: %s",
             err.message ? err.message : "");
}

int agent_session_prompt(agent_session *s, const char *user_text, const agent_callbacks *cbs_in,
                         agent_stop_reason *ret_stop, api_error *err)
{
    agent_callbacks none = AGENT_CALLBACKS_INIT;
    const agent_callbacks *cbs = cbs_in ? cbs_in : &none;
    agent_stop_reason stop = AGENT_STOP_END_TURN;
    if (ret_stop)
        *ret_stop = stop;
    int r = record(
        s, json_pack("{s:s, s:s}", "role", "user", "content", user_text ? user_text : ""), err);
    if (r < 0)
        return r;
    int max = s->cfg->max_steps > 0 ? s->cfg->max_steps : DEFAULT_MAX_STEPS;
    bool ran_tools = false;
    for (int step = 0;; step++) {
        if (cancelled(cbs)) {
            stop = AGENT_STOP_CANCELLED;
            break;
        }
        if (step >= max) {
            stop = AGENT_STOP_MAX_TURN_REQUESTS;
            break;
        }
        json_t *msg = NULL;
        _cleanup_free_ char *finish = NULL;
        if (!s->llm)
            msg = agent_eliza_reply(s->history, agent_toolset_shell_tool(s->toolset));
        else {
            r = agent_openai_chat(s->llm, s->history, s->tools, cbs->cancel, s->cfg->log_cb,
                                  s->cfg->log_payload, &msg, &finish, err);
            if (r == -ECANCELED) {
                stop = AGENT_STOP_CANCELLED;
                break;
            }
            if (r < 0)
                goto out;
        }
        if (!msg) {
            r = -ENOMEM;
            goto out;
        }
        json_incref(msg);
        r = record(s, msg, err);
        if (r < 0) {
            json_decref(msg);
            goto out;
        }
        const char *text = json_string_value(json_object_get(msg, "content"));
        if (text && *text && cbs->agent_text_cb)
            cbs->agent_text_cb(text, cbs->payload);
        json_t *calls = json_object_get(msg, "tool_calls");
        if (json_array_size(calls) == 0) {
            json_decref(msg);
            stop = finish_reason(finish);
            break;
        }
        ran_tools = true;
        r = run_calls(s, calls, cbs, err);
        json_decref(msg);
        if (r == -ECANCELED) {
            stop = AGENT_STOP_CANCELLED;
            break;
        }
        if (r < 0)
            goto out;
    }
    r = 0;
out:
    if (ran_tools)
        snapshot(s);
    if (ret_stop)
        *ret_stop = stop;
    return r;
}

int agent_session_replay(agent_session *s, const agent_callbacks *cbs)
{
    json_t *m, *pending = NULL;
    size_t i;
    json_array_foreach(s->history, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role")) ?: "";
        const char *content = json_string_value(json_object_get(m, "content"));
        if (strcmp(role, "user") == 0) {
            if (cbs->user_text_cb && content)
                cbs->user_text_cb(content, cbs->payload);
        } else if (strcmp(role, "assistant") == 0) {
            if (cbs->agent_text_cb && content && *content)
                cbs->agent_text_cb(content, cbs->payload);
            pending = json_object_get(m, "tool_calls");
            json_t *tc;
            size_t k;
            json_array_foreach(pending, k, tc)
            {
                agent_tool_call c;
                _cleanup_free_ char *title = NULL;
                fill_call(&c, tc, &title);
                if (cbs->tool_call_cb)
                    cbs->tool_call_cb(&c, cbs->payload);
            }
        } else if (strcmp(role, "tool") == 0) {
            const char *id = json_string_value(json_object_get(m, "tool_call_id")) ?: "";
            json_t *tc;
            size_t k;
            json_array_foreach(pending, k, tc)
            {
                if (strcmp(json_string_value(json_object_get(tc, "id")) ?: "", id) != 0)
                    continue;
                agent_tool_call c;
                _cleanup_free_ char *title = NULL;
                fill_call(&c, tc, &title);
                bool failed = content && (strncmp(content, "Error", 5) == 0 ||
                                          strncmp(content, "Tool call was cancelled", 23) == 0);
                if (cbs->tool_result_cb)
                    cbs->tool_result_cb(&c, failed ? AGENT_TOOL_FAILED : AGENT_TOOL_COMPLETED,
                                        content ? content : "", cbs->payload);
            }
        }
    }
    return 0;
}
