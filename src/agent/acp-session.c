/* ACP sessions: session/new, session/load (history replay), session/prompt (a worker thread per
 * turn, permission requests to the client before every tool call) and session/cancel. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/acp-server.h"
#include "basic/macro.h"
#include "shared/log.h"

/* --- server-wide set of open session names: one connection per session at a time --- */

static bool name_claim(acp_server *s, const char *name)
{
    bool ok = true;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_open; i++)
        if (strcmp(s->open_names[i], name) == 0)
            ok = false;
    if (ok) {
        char **n = realloc(s->open_names, (s->n_open + 1) * sizeof(*n));
        char *dup = strdup(name);
        if (n)
            s->open_names = n;
        if (!n || !dup) {
            free(dup);
            ok = false;
        } else {
            s->open_names[s->n_open++] = dup;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static void name_release(acp_server *s, const char *name)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n_open; i++)
        if (strcmp(s->open_names[i], name) == 0) {
            free(s->open_names[i]);
            s->open_names[i] = s->open_names[--s->n_open];
            break;
        }
    pthread_mutex_unlock(&s->lock);
}

static void call_map_clear(acp_session *ss)
{
    for (size_t i = 0; i < ss->n_call_map * 2; i++)
        free(ss->call_map[i]);
    free(ss->call_map);
    ss->call_map = NULL;
    ss->n_call_map = 0;
}

static acp_session *session_free(acp_session *ss)
{
    if (!ss)
        return NULL;
    if (ss->agent) {
        name_release(ss->conn->server, agent_session_name(ss->agent));
        agent_session_free(ss->agent);
    }
    call_map_clear(ss);
    free(ss->id);
    free(ss->cwd);
    free(ss);
    return NULL;
}

void acp_session_free_all(acp_conn *c)
{
    acp_session *ss = c->sessions;
    c->sessions = NULL;
    while (ss) {
        acp_session *next = ss->next;
        session_free(ss);
        ss = next;
    }
}

/* Looks a session up by id; borrowed, valid while the connection lives. Caller holds c->lock. */
static acp_session *session_find(acp_conn *c, const char *id)
{
    for (acp_session *ss = c->sessions; ss; ss = ss->next)
        if (strcmp(ss->id, id) == 0)
            return ss;
    return NULL;
}

static void reply_error(acp_conn *c, json_t *id, int code, const char *message)
{
    acp_conn_send(c, jsonrpc_error(id, code, message, NULL));
}

/* Opens agent session `name` and adds it to the connection. Returns the session (borrowed) or
 * NULL after replying with an error. */
static acp_session *session_open(acp_conn *c, json_t *id, const char *name, const char *cwd)
{
    /* A client that reconnects may be faster than the server noticing the old connection's
     * end: give that a moment before refusing. */
    bool claimed = false;
    for (int i = 0; i < 40 && !(claimed = name_claim(c->server, name)); i++)
        usleep(50 * 1000);
    if (!claimed) {
        reply_error(c, id, JSONRPC_ERR_INVALID_REQUEST, "session is already open on a connection");
        return NULL;
    }
    acp_session *ss = calloc(1, sizeof(*ss));
    api_error err = API_ERROR_INIT;
    int r = ss ? agent_session_new(&ss->agent, &c->server->cfg.agent, name, &err) : -ENOMEM;
    if (r >= 0 && (!(ss->id = strdup(name)) || !(ss->cwd = strdup(cwd))))
        r = -ENOMEM;
    if (r < 0) {
        char text[512];
        snprintf(text, sizeof(text), "cannot open session: %s",
                 err.message ? err.message : strerror(-r));
        api_error_clear(&err);
        if (ss && ss->agent)
            ss->conn = c; /* session_free releases the name */
        else
            name_release(c->server, name);
        session_free(ss);
        /* -EBUSY: another process holds the session (its pid and program are in the text). */
        reply_error(c, id,
                    r == -EINVAL  ? JSONRPC_ERR_INVALID_PARAMS
                    : r == -EBUSY ? JSONRPC_ERR_INVALID_REQUEST
                                  : JSONRPC_ERR_INTERNAL,
                    text);
        return NULL;
    }
    api_error_clear(&err);
    ss->conn = c;
    pthread_mutex_lock(&c->lock);
    ss->next = c->sessions;
    c->sessions = ss;
    pthread_mutex_unlock(&c->lock);
    return ss;
}

void acp_session_handle_new(acp_conn *c, json_t *id, const json_t *params)
{
    const char *cwd;
    _cleanup_(api_error_clearp) api_error perr = API_ERROR_INIT;
    if (acp_params_session(params, false, NULL, &cwd, &perr) < 0) {
        reply_error(c, id, JSONRPC_ERR_INVALID_PARAMS,
                    perr.message ? perr.message : "out of memory");
        return;
    }
    _cleanup_free_ char *name = NULL;
    if (agent_session_name_generate(&name) < 0) {
        reply_error(c, id, JSONRPC_ERR_INTERNAL, "cannot generate a session id");
        return;
    }
    acp_session *ss = session_open(c, id, name, cwd);
    if (!ss)
        return;
    log_info("acp: session created", "session", ss->id);
    acp_conn_send(c, jsonrpc_result(id, json_pack("{s:s}", "sessionId", ss->id)));
}

/* --- session/update notifications --- */

static void send_update(acp_session *ss, json_t *update)
{
    if (!update)
        return;
    acp_conn_send(ss->conn,
                  jsonrpc_notification("session/update", json_pack("{s:s,s:o}", "sessionId",
                                                                       ss->id, "update", update)));
}

static json_t *text_block(const char *text)
{
    return json_pack("{s:s,s:s}", "type", "text", "text", text ? text : "");
}

static void on_user_text(const char *text, void *payload)
{
    send_update(payload, json_pack("{s:s,s:o}", "sessionUpdate", "user_message_chunk", "content",
                                   text_block(text)));
}

static void on_agent_text(const char *text, void *payload)
{
    send_update(payload, json_pack("{s:s,s:o}", "sessionUpdate", "agent_message_chunk", "content",
                                   text_block(text)));
}

/* rawInput must be a JSON object: the parsed arguments, or {"arguments": text}. */
static json_t *raw_input(const char *arguments)
{
    json_t *j = arguments ? json_loads(arguments, 0, NULL) : NULL;
    if (json_is_object(j))
        return j;
    json_decref(j);
    return json_pack("{s:s}", "arguments", arguments ? arguments : "");
}

static const char *valid_kind(const char *kind)
{
    static const char *const kinds[] = {"read",    "edit",  "delete", "move",        "search",
                                        "execute", "think", "fetch",  "switch_mode", "other"};
    for (size_t i = 0; kind && i < ELEMENTSOF(kinds); i++)
        if (strcmp(kind, kinds[i]) == 0)
            return kind;
    return "other";
}

/* The toolCallId of a model call id in this turn (borrowed), made on first sight. */
static const char *tool_call_id(acp_session *ss, const char *model_id)
{
    const char *mid = model_id ? model_id : "";
    for (size_t i = 0; i < ss->n_call_map; i++)
        if (strcmp(ss->call_map[2 * i], mid) == 0)
            return ss->call_map[2 * i + 1];
    char **m = realloc(ss->call_map, (ss->n_call_map + 1) * 2 * sizeof(*m));
    if (!m)
        return mid;
    ss->call_map = m;
    char *acp_id = NULL;
    if (asprintf(&acp_id, "call-%u", ++ss->seq) < 0)
        return mid;
    m[2 * ss->n_call_map] = strdup(mid);
    m[2 * ss->n_call_map + 1] = acp_id;
    if (!m[2 * ss->n_call_map]) {
        free(acp_id);
        return mid;
    }
    ss->n_call_map++;
    return acp_id;
}

static void on_tool_call(const agent_tool_call *call, void *payload)
{
    acp_session *ss = payload;
    send_update(ss,
                json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "sessionUpdate", "tool_call", "toolCallId",
                          tool_call_id(ss, call->id), "title",
                          call->title ? call->title : call->name, "kind", valid_kind(call->kind),
                          "status", "pending", "rawInput", raw_input(call->arguments)));
}

static agent_permission on_permission(const agent_tool_call *call, void *payload)
{
    acp_session *ss = payload;
    json_t *params = json_pack("{s:s,s:{s:s,s:s,s:s,s:s,s:o},s:o}", "sessionId", ss->id, "toolCall",
                               "toolCallId", tool_call_id(ss, call->id), "title",
                               call->title ? call->title : call->name, "kind",
                               valid_kind(call->kind), "status", "pending", "rawInput",
                               raw_input(call->arguments), "options", acp_permission_options());
    json_t *result = NULL, *error = NULL;
    int r =
        acp_conn_call(ss->conn, "session/request_permission", params, &ss->cancel, &result, &error);
    if (r < 0)
        return AGENT_PERMISSION_CANCELLED;
    acp_permission p = acp_permission_from_response(result, error);
    json_decref(result);
    json_decref(error);
    if (ss->cancel)
        return AGENT_PERMISSION_CANCELLED;
    switch (p) {
    case ACP_PERMISSION_ALLOW_ONCE:
    case ACP_PERMISSION_ALLOW_ALWAYS:
        return p == ACP_PERMISSION_ALLOW_ONCE ? AGENT_PERMISSION_ALLOW_ONCE
                                              : AGENT_PERMISSION_ALLOW_ALWAYS;
    case ACP_PERMISSION_REJECT_ALWAYS:
        return AGENT_PERMISSION_REJECT_ALWAYS;
    case ACP_PERMISSION_CANCELLED:
        return AGENT_PERMISSION_CANCELLED;
    default:
        return AGENT_PERMISSION_REJECT_ONCE;
    }
}

/* Every call that runs goes pending -> in_progress -> completed/failed, also when an earlier
 * "allow always" means no permission is asked. */
static void on_tool_start(const agent_tool_call *call, void *payload)
{
    acp_session *ss = payload;
    send_update(ss, json_pack("{s:s,s:s,s:s}", "sessionUpdate", "tool_call_update", "toolCallId",
                              tool_call_id(ss, call->id), "status", "in_progress"));
}

static void on_tool_result(const agent_tool_call *call, agent_tool_status status,
                           const char *result, void *payload)
{
    acp_session *ss = payload;
    const char *text = result ? result : "";
    send_update(ss, json_pack("{s:s,s:s,s:s,s:[{s:s,s:o}],s:{s:s}}", "sessionUpdate",
                              "tool_call_update", "toolCallId", tool_call_id(ss, call->id),
                              "status", status == AGENT_TOOL_COMPLETED ? "completed" : "failed",
                              "content", "type", "content", "content", text_block(text),
                              "rawOutput", "output", text));
}

static void callbacks_init(agent_callbacks *cbs, acp_session *ss)
{
    *cbs = (agent_callbacks)AGENT_CALLBACKS_INIT;
    cbs->user_text_cb = on_user_text;
    cbs->agent_text_cb = on_agent_text;
    cbs->tool_call_cb = on_tool_call;
    cbs->permission_cb = on_permission;
    cbs->tool_start_cb = on_tool_start;
    cbs->tool_result_cb = on_tool_result;
    cbs->payload = ss;
    cbs->cancel = &ss->cancel;
}

void acp_session_handle_load(acp_conn *c, json_t *id, const json_t *params)
{
    const char *sid, *cwd;
    _cleanup_(api_error_clearp) api_error perr = API_ERROR_INIT;
    if (acp_params_session(params, true, &sid, &cwd, &perr) < 0) {
        reply_error(c, id, JSONRPC_ERR_INVALID_PARAMS,
                    perr.message ? perr.message : "out of memory");
        return;
    }
    pthread_mutex_lock(&c->lock);
    bool open_here = session_find(c, sid) != NULL;
    pthread_mutex_unlock(&c->lock);
    if (open_here) {
        reply_error(c, id, JSONRPC_ERR_INVALID_REQUEST, "session is already open on this connection");
        return;
    }
    if (!agent_session_name_valid(sid) || !agent_session_exists(&c->server->cfg.agent, sid)) {
        acp_conn_send(c, jsonrpc_error(id, ACP_ERR_RESOURCE_NOT_FOUND, "Resource not found",
                                           json_pack("{s:s}", "sessionId", sid)));
        return;
    }
    acp_session *ss = session_open(c, id, sid, cwd);
    if (!ss)
        return;
    /* The replay runs before the answer, as the protocol requires. No other thread uses the
     * session yet: its id was not announced on this connection before. */
    agent_callbacks cbs;
    callbacks_init(&cbs, ss);
    cbs.permission_cb = NULL;
    agent_session_replay(ss->agent, &cbs);
    call_map_clear(ss);
    log_info("acp: session loaded", "session", ss->id);
    acp_conn_send(c, jsonrpc_result(id, json_object()));
}

typedef struct prompt_job {
    acp_session *ss;
    json_t *id;
    char *text;
} prompt_job;

static void *prompt_thread(void *arg)
{
    prompt_job *job = arg;
    acp_session *ss = job->ss;
    acp_conn *c = ss->conn;
    agent_callbacks cbs;
    callbacks_init(&cbs, ss);
    agent_stop_reason stop = AGENT_STOP_END_TURN;
    api_error err = API_ERROR_INIT;
    int r = agent_session_prompt(ss->agent, job->text, &cbs, &stop, &err);
    const char *msg = err.message;
    call_map_clear(ss);
    if (ss->cancel)
        stop = AGENT_STOP_CANCELLED;
    /* The session is free again before the answer goes out: a client may send its next prompt
     * the moment it reads the answer. This thread touches only the connection from here on. */
    pthread_mutex_lock(&c->lock);
    ss->busy = false;
    pthread_mutex_unlock(&c->lock);
    if (r < 0 && stop != AGENT_STOP_CANCELLED) {
        log_warn("acp: prompt failed", "session", ss->id, "error", msg ? msg : strerror(-r));
        acp_conn_send(c,
                      jsonrpc_error(job->id, JSONRPC_ERR_INTERNAL, msg ? msg : strerror(-r), NULL));
    } else {
        acp_conn_send(c, jsonrpc_result(job->id, json_pack("{s:s}", "stopReason",
                                                               agent_stop_reason_name(stop))));
    }
    api_error_clear(&err);
    json_decref(job->id);
    free(job->text);
    free(job);
    pthread_mutex_lock(&c->lock);
    c->workers--;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

void acp_session_handle_prompt(acp_conn *c, json_t *id, const json_t *params)
{
    const char *sid;
    _cleanup_(api_error_clearp) api_error perr = API_ERROR_INIT;
    char *text = NULL;
    if (acp_params_prompt(params, &sid, &text, &perr) < 0) {
        reply_error(c, id, JSONRPC_ERR_INVALID_PARAMS,
                    perr.message ? perr.message : "out of memory");
        return;
    }
    prompt_job *job = calloc(1, sizeof(*job));
    if (!job) {
        free(text);
        reply_error(c, id, JSONRPC_ERR_INTERNAL, "out of memory");
        return;
    }
    pthread_mutex_lock(&c->lock);
    acp_session *ss = session_find(c, sid);
    const char *err = !ss        ? "unknown session"
                      : ss->busy ? "a prompt is already running in this session"
                                 : NULL;
    if (err) {
        pthread_mutex_unlock(&c->lock);
        free(text);
        free(job);
        if (!ss)
            acp_conn_send(c, jsonrpc_error(id, ACP_ERR_RESOURCE_NOT_FOUND, "Resource not found",
                                               json_pack("{s:s}", "sessionId", sid)));
        else
            reply_error(c, id, JSONRPC_ERR_INVALID_REQUEST, err);
        return;
    }
    ss->busy = true;
    ss->cancel = 0;
    c->workers++;
    job->ss = ss;
    job->id = json_incref(id);
    job->text = text;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int r = pthread_create(&t, &attr, prompt_thread, job);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        ss->busy = false;
        c->workers--;
    }
    pthread_mutex_unlock(&c->lock);
    if (r != 0) {
        json_decref(job->id);
        free(job->text);
        free(job);
        reply_error(c, id, JSONRPC_ERR_INTERNAL, "cannot start the prompt thread");
    }
}

void acp_session_handle_cancel(acp_conn *c, const json_t *params)
{
    const char *sid;
    _cleanup_(api_error_clearp) api_error perr = API_ERROR_INIT;
    if (acp_params_cancel(params, &sid, &perr) < 0)
        return;
    pthread_mutex_lock(&c->lock);
    acp_session *ss = session_find(c, sid);
    if (ss && ss->busy) {
        ss->cancel = 1;
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
    if (ss)
        log_info("acp: cancel", "session", sid);
}
