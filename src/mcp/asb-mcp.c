/* `asb mcp [--listen HOST:PORT]`: the verb and the protocol core (lifecycle, dispatch, progress
 * and cancellation bookkeeping). Transports live in asb-mcp-stdio.c and asb-mcp-http.c. */
#include <arpa/inet.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "mcp/asb-mcp.h"
#include "cli/asb.h"

const char *const mcp_versions[] = {MCP_LATEST_VERSION, "2025-06-18", "2025-03-26", "2024-11-05",
                                    NULL};

volatile int mcp_stop;

void mcp_server_init(mcp_server *s)
{
    pthread_mutex_init(&s->lock, NULL);
    s->running = NULL;
}

void mcp_server_done(mcp_server *s)
{
    pthread_mutex_destroy(&s->lock);
}

void mcp_call_done(mcp_call *call)
{
    json_decref(call->id);
    json_decref(call->progress_token);
    call->id = call->progress_token = NULL;
}

bool mcp_version_at_least(const mcp_session *session, const char *version)
{
    return session->version[0] && strcmp(session->version, version) >= 0;
}

static void running_add(mcp_server *s, mcp_call *call)
{
    pthread_mutex_lock(&s->lock);
    call->next = s->running;
    s->running = call;
    pthread_mutex_unlock(&s->lock);
}

static void running_remove(mcp_server *s, mcp_call *call)
{
    pthread_mutex_lock(&s->lock);
    for (mcp_call **p = &s->running; *p; p = &(*p)->next)
        if (*p == call) {
            *p = call->next;
            break;
        }
    pthread_mutex_unlock(&s->lock);
}

void mcp_cancel(mcp_server *s, const mcp_session *session, const json_t *id)
{
    pthread_mutex_lock(&s->lock);
    for (mcp_call *c = s->running; c; c = c->next)
        if (c->session == session && json_equal(c->id, (json_t *)id))
            c->cancel = 1;
    pthread_mutex_unlock(&s->lock);
}

static json_t *initialize(mcp_session *session, const json_t *params, api_error *err)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    if (!json_is_object(params) || !asked) {
        api_error_set_errno(err, -EINVAL, "initialize needs params.protocolVersion (a string)");
        return NULL;
    }
    const char *v = MCP_LATEST_VERSION;
    for (size_t i = 0; mcp_versions[i]; i++)
        if (strcmp(asked, mcp_versions[i]) == 0)
            v = mcp_versions[i];
    snprintf(session->version, sizeof(session->version), "%s", v);
    return json_pack(
        "{s:s,s:{s:{s:b},s:{s:b,s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", v, "capabilities",
        "tools", "listChanged", 0, "resources", "subscribe", 0, "listChanged", 0, "serverInfo",
        "name", "asb-mcp", "title", "Agent Sandbox", "version", ASB_VERSION, "instructions",
        "Isolated, stateful sandboxes. Claim one with create_sandbox (from a warm pool), run "
        "commands with execute_command, move files with upload_file/download_file/list_files, "
        "and delete_sandbox when done. Every tool takes the claim name (or a Sandbox name).");
}

/* params._meta.progressToken: a string or an integer. */
static json_t *progress_token_of(const json_t *params)
{
    json_t *t = json_object_get(json_object_get(params, "_meta"), "progressToken");
    return json_is_string(t) || json_is_integer(t) ? json_incref(t) : NULL;
}

static json_t *dispatch(mcp_server *s, mcp_call *call, const jsonrpc_msg *m)
{
    const char *method = m->method;
    const json_t *params = m->params;
    /* The words of an error reply: err's message, else (out of memory on the way) this. */
    const char *why = "invalid params";
    int code = JSONRPC_ERR_INVALID_PARAMS;
    json_t *result = NULL;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;

    if (strcmp(method, "initialize") == 0) {
        result = initialize(call->session, params, &err);
    } else if (strcmp(method, "ping") == 0) {
        result = json_object();
    } else if (!call->session->version[0]) {
        code = JSONRPC_ERR_INVALID_REQUEST;
        why = "the session is not initialized: send initialize first";
    } else if (strcmp(method, "tools/list") == 0) {
        result = mcp_tools_list(call->session);
    } else if (strcmp(method, "tools/call") == 0) {
        running_add(s, call);
        result = mcp_tools_call(call, params, &code, &err);
        running_remove(s, call);
    } else if (strcmp(method, "resources/list") == 0) {
        result = mcp_resources_list(call, &code, &err);
    } else if (strcmp(method, "resources/templates/list") == 0) {
        result = mcp_resource_templates_list();
    } else if (strcmp(method, "resources/read") == 0) {
        result = mcp_resources_read(call, params, &code, &err);
    } else if (strcmp(method, "prompts/list") == 0) {
        result = json_pack("{s:[]}", "prompts");
    } else {
        code = JSONRPC_ERR_METHOD_NOT_FOUND;
        why = "method not found";
    }
    if (result)
        return jsonrpc_result(call->id, result);
    return jsonrpc_error(call->id, code, err.message ? err.message : why, NULL);
}

json_t *mcp_handle(mcp_server *s, mcp_call *call, const jsonrpc_msg *m)
{
    if (m->kind == JSONRPC_MSG_RESPONSE)
        return NULL; /* we send no requests; a stray response is dropped */
    if (m->kind == JSONRPC_MSG_NOTIFICATION) {
        if (strcmp(m->method, "notifications/cancelled") == 0) {
            json_t *id = json_object_get(m->params, "requestId");
            if (id)
                mcp_cancel(s, call->session, id);
        } else if (strcmp(m->method, "notifications/initialized") == 0) {
            call->session->initialized = true;
        }
        return NULL;
    }
    call->id = json_incref(m->id);
    call->progress_token = progress_token_of(m->params);
    json_t *reply = dispatch(s, call, m);
    if (!reply) /* out of memory building the reply: still answer */
        reply = jsonrpc_error(call->id, JSONRPC_ERR_INTERNAL, "out of memory", NULL);
    return reply;
}

static void mcp_usage(FILE *f)
{
    fprintf(f,
            "Usage: asb mcp [--listen HOST:PORT [--auth-token TOKEN | --allow-unauthenticated]]\n"
            "               [--via-router]\n\n"
            "Serve the Model Context Protocol: tools to claim sandboxes, run commands and move\n"
            "files, and resources for the sandboxes and their files. Over stdio by default;\n"
            "with --listen over Streamable HTTP at http://HOST:PORT/mcp.\n\n"
            "Options:\n"
            "  --listen HOST:PORT         serve Streamable HTTP instead of stdio\n"
            "  --auth-token TOKEN         bearer token HTTP clients must send (default: the asb\n"
            "                             token, $ASB_TOKEN then $ASB_STATE_DIR/token)\n"
            "  --allow-unauthenticated    no bearer token (only on a loopback address)\n"
            "  --via-router               reach sandboxes through the router ($ASB_ROUTER, else\n"
            "                             $ASB_STATE_DIR/router), as against a cluster\n"
            "  -h, --help                 show this help\n" CLI_GLOBAL_HELP
            "\nTools take `namespace`; -n sets its default. See docs/mcp.md for agent host\n"
            "configuration.\n");
}

static void on_signal(int sig)
{
    mcp_stop = 1;
}

static bool loopback(const char *listen)
{
    return strncmp(listen, "127.", 4) == 0 || strncmp(listen, "localhost:", 10) == 0 ||
           strncmp(listen, "[::1]:", 6) == 0;
}

/* The token HTTP clients must present: --auth-token, else the one the asb client uses. */
static char *http_token(const char *given)
{
    if (given)
        return strdup(given);
    if (cli_global.token)
        return strdup(cli_global.token);
    const char *env = getenv("ASB_TOKEN");
    if (env && *env)
        return strdup(env);
    _cleanup_free_ char *state = NULL, *text = NULL;
    if (asb_client_default_state_dir(&state) != ASB_OK)
        return NULL;
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/token", state) < 0)
        return NULL;
    size_t len;
    if (cli_read_file(path, &text, &len) < 0)
        return NULL;
    text[strcspn(text, "\r\n")] = 0;
    return *text ? TAKE_PTR(text) : NULL;
}

int asb_mcp(int argc, char **argv)
{
    enum { OPT_LISTEN = 0x2001, OPT_NOAUTH, OPT_AUTH_TOKEN, OPT_VIA_ROUTER };
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'},
                                         {"listen", required_argument, NULL, OPT_LISTEN},
                                         {"auth-token", required_argument, NULL, OPT_AUTH_TOKEN},
                                         {"allow-unauthenticated", no_argument, NULL, OPT_NOAUTH},
                                         {"via-router", no_argument, NULL, OPT_VIA_ROUTER},
                                         CLI_GLOBAL_LONG,
                                         {0}};
    const char *listen = NULL, *auth_token = NULL;
    bool noauth = false;
    int c;
    while ((c = getopt_long(argc, argv, "h" CLI_GLOBAL_SHORT, opts, NULL)) != -1) {
        if (cli_global_option(c, optarg))
            continue;
        if (c == OPT_LISTEN)
            listen = optarg;
        else if (c == OPT_AUTH_TOKEN)
            auth_token = optarg;
        else if (c == OPT_NOAUTH)
            noauth = true;
        else if (c == OPT_VIA_ROUTER)
            mcp_via_router = true;
        else if (c != 'h')
            return cli_usage_option(c, argv, NULL);
        else {
            mcp_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind < argc) {
        mcp_usage(stderr);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    mcp_server s;
    mcp_server_init(&s);
    int r;
    if (!listen) {
        r = mcp_serve_stdio(&s);
    } else {
        if (noauth && !loopback(listen)) {
            fprintf(stderr, "asb mcp: --allow-unauthenticated is only allowed on a loopback "
                            "address (127.0.0.1, [::1], localhost)\n");
            mcp_server_done(&s);
            return 2;
        }
        _cleanup_free_ char *token = noauth ? NULL : http_token(auth_token);
        if (!noauth && !token) {
            fprintf(stderr, "asb mcp: no bearer token for HTTP clients: give --auth-token, set "
                            "$ASB_TOKEN, or --allow-unauthenticated on a loopback address\n");
            mcp_server_done(&s);
            return 2;
        }
        mcp_http_options o = {.listen = listen, .token = token};
        r = mcp_serve_http(&s, &o);
    }
    mcp_sandbox_cache_clear();
    mcp_server_done(&s);
    return r < 0 ? 1 : 0;
}
