/* acp-client ADDR: a terminal client for acp-server (or any ACP agent on TCP). Reads prompts from
 * stdin, prints the agent's replies and tool calls, and asks the person to allow or reject every
 * tool call. See docs/acp.md. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/acp-jsonrpc.h"
#include "agent/acp-server.h"
#include "asb/client.h"
#include "basic/io-util.h"
#include "basic/macro.h"
#include "shared/main-usage.h"

typedef struct client {
    int fd;
    char *buf;
    size_t len, cap;
    json_int_t next_id;
    FILE *answers; /* where permission answers are read */
    char *session_id;
    bool quiet;
} client;

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    interrupted = 1;
}

static int connect_addr(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    if (!colon)
        return -EINVAL;
    _cleanup_free_ char *host = strndup(addr, (size_t)(colon - addr));
    if (!host)
        return -ENOMEM;
    char *h = host;
    size_t hl = strlen(h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h[hl - 1] = 0;
        h++;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(h, colon + 1, &hints, &ai) != 0)
        return -EHOSTUNREACH;
    int r = -ECONNREFUSED;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            r = fd;
            break;
        }
        r = -errno;
        close(fd);
    }
    freeaddrinfo(ai);
    return r;
}

static int send_msg(client *c, json_t *msg)
{
    size_t len;
    char *line = msg ? jsonrpc_dump(msg, &len) : NULL;
    json_decref(msg);
    if (!line)
        return -ENOMEM;
    int r = loop_send(c->fd, line, len);
    free(line);
    return r < 0 ? -EPIPE : 0;
}

/* Next message from the agent. Returns 1 with *m filled, 0 on EOF, -EINTR when interrupted. */
static int recv_msg(client *c, jsonrpc_msg *m)
{
    for (;;) {
        char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            json_t *err = NULL;
            int r = jsonrpc_parse(c->buf, n, m, &err);
            json_decref(err);
            memmove(c->buf, nl + 1, c->len - n - 1);
            c->len -= n + 1;
            if (r == 0)
                return 1;
            continue;
        }
        if (c->len == c->cap) {
            if (c->cap >= JSONRPC_MAX_LINE)
                return 0;
            size_t ncap = c->cap ? c->cap * 2 : 65536;
            char *nb = realloc(c->buf, ncap);
            if (!nb)
                return 0;
            c->buf = nb;
            c->cap = ncap;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int pr = poll(&p, 1, 200);
        if (interrupted)
            return -EINTR;
        if (pr <= 0)
            continue;
        ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        c->len += (size_t)n;
    }
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static void print_update(client *c, const json_t *params)
{
    json_t *u = json_object_get(params, "update");
    const char *kind = str(u, "sessionUpdate");
    if (strcmp(kind, "agent_message_chunk") == 0) {
        printf("Agent> %s\n", str(json_object_get(u, "content"), "text"));
    } else if (strcmp(kind, "user_message_chunk") == 0) {
        printf("User> %s\n", str(json_object_get(u, "content"), "text"));
    } else if (strcmp(kind, "tool_call") == 0) {
        printf("[tool %s] %s\n", str(u, "toolCallId"), str(u, "title"));
    } else if (strcmp(kind, "tool_call_update") == 0) {
        const char *status = str(u, "status");
        json_t *content = json_object_get(u, "content");
        printf("[tool %s] %s\n", str(u, "toolCallId"), status);
        size_t i;
        json_t *item;
        json_array_foreach (content, i, item) {
            const char *t = str(json_object_get(item, "content"), "text");
            if (*t && !c->quiet)
                printf("%s%s", t, t[strlen(t) - 1] == '\n' ? "" : "\n");
        }
    }
    fflush(stdout);
}

/* Asks the person; returns the optionId to send (static) or NULL for "cancelled". */
static const char *ask_permission(client *c, const json_t *params)
{
    json_t *tc = json_object_get(params, "toolCall");
    json_t *raw = json_object_get(tc, "rawInput");
    char *args = raw ? json_dumps(raw, JSON_COMPACT) : NULL;
    for (;;) {
        printf("Allow tool call %s%s%s? [y]es once / [a]lways / [n]o / [r]eject always: ",
               str(tc, "title"), args ? " " : "", args ? args : "");
        fflush(stdout);
        char line[64];
        if (!fgets(line, sizeof(line), c->answers)) {
            printf("\n");
            free(args);
            return "reject_once";
        }
        const char *id = NULL;
        switch (line[0]) {
        case 'y':
        case 'Y':
            id = "allow_once";
            break;
        case 'a':
        case 'A':
            id = "allow_always";
            break;
        case 'n':
        case 'N':
            id = "reject_once";
            break;
        case 'r':
        case 'R':
            id = "reject_always";
            break;
        }
        if (id) {
            free(args);
            return id;
        }
    }
}

static void answer_request(client *c, const jsonrpc_msg *m)
{
    if (strcmp(m->method, "session/request_permission") == 0) {
        const char *opt = ask_permission(c, m->params);
        send_msg(c, jsonrpc_result(m->id, json_pack("{s:{s:s,s:s}}", "outcome", "outcome",
                                                        "selected", "optionId", opt)));
        return;
    }
    send_msg(c, jsonrpc_error(m->id, JSONRPC_ERR_METHOD_NOT_FOUND, "Method not found",
                                  json_pack("{s:s}", "method", m->method)));
}

/* Sends a request and handles traffic until its answer. Returns 0 with *ret_result (owned), or
 * -EIO with the error printed. On Ctrl-C sends session/cancel once and keeps waiting. */
static int call(client *c, const char *method, json_t *params, json_t **ret_result)
{
    json_int_t id = c->next_id++;
    if (send_msg(c, jsonrpc_request(id, method, params)) < 0) {
        fprintf(stderr, "acp-client: connection lost\n");
        return -EPIPE;
    }
    bool cancel_sent = false;
    for (;;) {
        jsonrpc_msg m;
        int r = recv_msg(c, &m);
        if (r == -EINTR) {
            interrupted = 0;
            if (!cancel_sent && c->session_id) {
                send_msg(c, jsonrpc_notification(
                                "session/cancel", json_pack("{s:s}", "sessionId", c->session_id)));
                cancel_sent = true;
            }
            continue;
        }
        if (r <= 0) {
            fprintf(stderr, "acp-client: connection closed by the agent\n");
            return -EPIPE;
        }
        if (m.kind == JSONRPC_MSG_RESPONSE && json_is_integer(m.id) && json_integer_value(m.id) == id) {
            if (m.error) {
                fprintf(stderr, "acp-client: %s failed: %s (%lld)\n", method,
                        str(m.error, "message"),
                        (long long)json_integer_value(json_object_get(m.error, "code")));
                jsonrpc_msg_done(&m);
                return -EIO;
            }
            *ret_result = json_incref(m.result);
            jsonrpc_msg_done(&m);
            return 0;
        }
        if (m.kind == JSONRPC_MSG_NOTIFICATION && strcmp(m.method, "session/update") == 0)
            print_update(c, m.params);
        else if (m.kind == JSONRPC_MSG_REQUEST)
            answer_request(c, &m);
        jsonrpc_msg_done(&m);
    }
}

static char *read_token(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char buf[4096];
    char *s = fgets(buf, sizeof(buf), f);
    fclose(f);
    if (!s)
        return NULL;
    buf[strcspn(buf, " \r\n\t")] = 0;
    return buf[0] ? strdup(buf) : NULL;
}

static char *find_token(const char *token_file)
{
    if (token_file)
        return read_token(token_file);
    const char *e = getenv("ASB_TOKEN");
    if (e && *e)
        return strdup(e);
    _cleanup_free_ char *dir = NULL, *path = NULL;
    if (asb_client_default_state_dir(&dir) != 0 || asprintf(&path, "%s/token", dir) < 0)
        return NULL;
    return read_token(path);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: acp-client [--token-file PATH] [--session ID] [--tty] [--quiet] HOST:PORT\n"
               "Talks to an ACP agent on TCP: each stdin line is a prompt; every tool call is\n"
               "shown and needs an answer: y (allow once), a (allow always), n (reject),\n"
               "r (reject always). Answers come from stdin, or from /dev/tty with --tty.\n"
               "Ctrl-C cancels the running turn; /exit, /quit or end of input quit.\n");
}

static int authenticate(client *c, const json_t *init, const char *token_file)
{
    bool offered = false;
    size_t i;
    json_t *m;
    json_array_foreach (json_object_get(init, "authMethods"), i, m)
        offered = offered || strcmp(str(m, "id"), ACP_AUTH_METHOD_ID) == 0;
    if (!offered)
        return 0;
    _cleanup_free_ char *token = find_token(token_file);
    if (!token) {
        fprintf(stderr, "acp-client: no token (--token-file, $ASB_TOKEN or $ASB_STATE_DIR/token); "
                        "trying without\n");
        return 0;
    }
    json_t *res = NULL;
    int r = call(
        c, "authenticate",
        json_pack("{s:s,s:{s:s}}", "methodId", ACP_AUTH_METHOD_ID, "_meta", "token", token), &res);
    json_decref(res);
    return r;
}

static int open_session(client *c, const char *load_id)
{
    char cwd[4096];
    if (!getcwd(cwd, sizeof(cwd)))
        strcpy(cwd, "/");
    json_t *res = NULL;
    int r;
    if (load_id) {
        c->session_id = strdup(load_id);
        r = call(c, "session/load",
                 json_pack("{s:s,s:s,s:[]}", "sessionId", load_id, "cwd", cwd, "mcpServers"), &res);
    } else {
        r = call(c, "session/new", json_pack("{s:s,s:[]}", "cwd", cwd, "mcpServers"), &res);
        const char *sid = json_string_value(json_object_get(res, "sessionId"));
        if (r == 0 && !sid)
            r = -EPROTO;
        if (r == 0)
            c->session_id = strdup(sid);
    }
    json_decref(res);
    if (r == 0)
        fprintf(stderr, "acp-client: session %s\n", c->session_id);
    return r;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"token-file", required_argument, NULL, 't'},
        {"session", required_argument, NULL, 's'},
        {"tty", no_argument, NULL, 'T'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *token_file = NULL, *load_id = NULL;
    bool tty = false;
    client c = {.fd = -1, .answers = stdin};
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        switch (o) {
        case 't':
            token_file = optarg;
            break;
        case 's':
            load_id = optarg;
            break;
        case 'T':
            tty = true;
            break;
        case 'q':
            c.quiet = true;
            break;
        default:
            return main_usage_option(o, usage);
        }
    }
    if (optind + 1 != argc)
        return main_usage_error(usage);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
    if (tty && !(c.answers = fopen("/dev/tty", "re"))) {
        fprintf(stderr, "acp-client: cannot open /dev/tty: %m\n");
        return 1;
    }
    c.fd = connect_addr(argv[optind]);
    if (c.fd < 0) {
        fprintf(stderr, "acp-client: cannot connect to %s: %s\n", argv[optind], strerror(-c.fd));
        return 1;
    }
    json_t *init = NULL;
    int r = call(&c, "initialize",
                 json_pack("{s:i,s:{s:{s:b,s:b},s:b}}", "protocolVersion", ACP_PROTOCOL_VERSION,
                           "clientCapabilities", "fs", "readTextFile", 0, "writeTextFile", 0,
                           "terminal", 0),
                 &init);
    if (r == 0)
        r = authenticate(&c, init, token_file);
    json_decref(init);
    if (r == 0)
        r = open_session(&c, load_id);
    char *line = NULL;
    size_t cap = 0;
    while (r == 0) {
        printf("User> ");
        fflush(stdout);
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            printf("\n");
            break;
        }
        line[strcspn(line, "\r\n")] = 0;
        if (strcmp(line, "/exit") == 0 || strcmp(line, "/quit") == 0)
            break;
        if (!line[0])
            continue;
        json_t *res = NULL;
        r = call(&c, "session/prompt",
                 json_pack("{s:s,s:[{s:s,s:s}]}", "sessionId", c.session_id, "prompt", "type",
                           "text", "text", line),
                 &res);
        if (r == -EIO)
            r = 0; /* the turn failed; the session goes on */
        else if (r == 0)
            fprintf(stderr, "acp-client: turn ended: %s\n", str(res, "stopReason"));
        json_decref(res);
    }
    free(line);
    free(c.session_id);
    free(c.buf);
    close(c.fd);
    if (c.answers != stdin)
        fclose(c.answers);
    return r == 0 ? 0 : 1;
}
