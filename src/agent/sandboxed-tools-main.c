/* sandboxed-tools: interactive agent CLI. The loop runs here; every tool call runs inside the
 * session's sandbox (agent-loop.h). Flags and environment follow upstream's
 * examples/sandboxed-tools (UPSTREAM.md §6), plus -toolset, -pool and -tool-timeout. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "agent/agent-loop.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "shared/main-usage.h"

static volatile int cancel_flag;
static volatile int in_turn;

static void on_sigint(int sig)
{
    if (!in_turn)
        _exit(130);
    cancel_flag = 1;
}

static void usage(FILE *f)
{
    fputs("Usage: sandboxed-tools [flags]\n"
          "  -session NAME        session name, [a-z0-9]{1,40} (env SESSION_NAME, default "
          "\"default\")\n"
          "  -toolset NAME        basic or geminicli (env TOOLSET, default basic)\n"
          "  -image IMAGE         sandbox image (env SANDBOX_IMAGE, default host)\n"
          "  -homedir DIR         home directory in the sandbox (env SANDBOX_HOME_DIR, default "
          "/home/clawtainer)\n"
          "  -namespace NS        namespace (env SANDBOX_NAMESPACE, default default)\n"
          "  -pool NAME           claim sandboxes from this SandboxWarmPool\n"
          "  -fork-from SESSION   start a new session whose sandbox is a copy of SESSION's (its\n"
          "                       newest backup when it has none); -session default: generated\n"
          "  -tool-timeout DUR    kill a tool running longer than DUR (e.g. 30s, 2m)\n"
          "  -delete-session NAME delete session NAME for good: its sandbox (or claim) and its\n"
          "                       history and backups; refused while it is in use\n"
          "Environment: OPENAI_BASE_URL, GEMINI_API_KEY or OPENAI_API_KEY, OPENAI_MODEL "
          "(fake-eliza: built-in fake model), ASB_SERVER, ASB_TOKEN, ASB_STATE_DIR.\n"
          "In the REPL: /exit or /quit (or end of input) ends the session.\n",
          f);
}

static void log_stderr(int level, const char *msg, void *payload)
{
    if (level <= AGENT_LOG_WARNING || getenv("SANDBOXED_TOOLS_VERBOSE"))
        fprintf(stderr, "%s: %s\n", level <= AGENT_LOG_WARNING ? "warning" : "info", msg);
}

static void print_user(const char *text, void *p)
{
    printf("User> %s\n", text);
}

static void print_agent(const char *text, void *p)
{
    printf("Agent> %s\n", text);
    fflush(stdout);
}

static void print_tool(const agent_tool_call *c, void *p)
{
    fprintf(stderr, "[tool %s] %s\n", c->id, c->title);
}

static void print_result(const agent_tool_call *c, agent_tool_status st, const char *r, void *p)
{
    if (getenv("SANDBOXED_TOOLS_VERBOSE"))
        fprintf(stderr, "[tool %s %s]\n%s\n", c->id, st == AGENT_TOOL_COMPLETED ? "done" : "failed",
                r);
}

/* -name VALUE, -name=VALUE, --name VALUE, --name=VALUE. */
static bool flag(int argc, char **argv, int *i, const char *name, const char **ret)
{
    const char *a = argv[*i];
    if (a[0] != '-')
        return false;
    a += a[1] == '-' ? 2 : 1;
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return false;
    if (a[n] == '=') {
        *ret = a + n + 1;
        return true;
    }
    if (a[n] != '\0')
        return false;
    if (*i + 1 >= argc) {
        fprintf(stderr, "flag needs an argument: -%s\n", name);
        exit(2);
    }
    *ret = argv[++*i];
    return true;
}

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* -fork-from starts a new session from an existing one: 0, or the exit status. */
static int check_fork(const agent_config *cfg, const char *session)
{
    if (!agent_session_name_valid(cfg->fork_from)) {
        fprintf(stderr, "sandboxed-tools: invalid -fork-from session name \"%s\"\n",
                cfg->fork_from);
        return 2;
    }
    if (cfg->pool) {
        fprintf(stderr, "sandboxed-tools: -fork-from makes a Sandbox like the seed's; it cannot "
                        "claim from -pool\n");
        return 2;
    }
    if (strcmp(cfg->fork_from, session) == 0) {
        fprintf(stderr, "sandboxed-tools: a session cannot be forked into itself\n");
        return 2;
    }
    if (agent_session_exists(cfg, session)) {
        fprintf(stderr,
                "sandboxed-tools: session \"%s\" already exists; -fork-from starts a new "
                "session: give another -session (or none for a generated name)\n",
                session);
        return 2;
    }
    fprintf(stderr, "Session %s (a fork of %s)\n", session, cfg->fork_from);
    return 0;
}

/* -delete-session NAME: the session and its sandbox go; exit 0, 1 (failed) or 2 (bad name). */
static int delete_one_session(agent_config *cfg, const char *name)
{
    if (!agent_session_name_valid(name)) {
        fprintf(stderr, "sandboxed-tools: invalid session name \"%s\": use 1 to 40 characters of "
                        "[a-z0-9]\n",
                name);
        return 2;
    }
    _cleanup_free_ char *msg = NULL;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    int r = agent_session_delete(cfg, name, &msg, &err);
    if (r < 0) {
        fprintf(stderr, "sandboxed-tools: %s\n", err.message ? err.message : strerror(-r));
        return 1;
    }
    printf("%s\n", msg ? msg : name);
    return 0;
}

/* The command line's flags into cfg and the out-parameters; -1 when the program goes on, else
 * its exit code. */
static int parse_flags(int argc, char **argv, agent_config *cfg, const char **session,
                       const char **timeout, const char **delete_session)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "-help") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (flag(argc, argv, &i, "session", session) ||
            flag(argc, argv, &i, "toolset", &cfg->toolset) ||
            flag(argc, argv, &i, "image", &cfg->image) ||
            flag(argc, argv, &i, "homedir", &cfg->homedir) ||
            flag(argc, argv, &i, "namespace", &cfg->ns) ||
            flag(argc, argv, &i, "pool", &cfg->pool) ||
            flag(argc, argv, &i, "tool-timeout", timeout) ||
            flag(argc, argv, &i, "fork-from", &cfg->fork_from) ||
            flag(argc, argv, &i, "delete-session", delete_session))
            continue;
        fprintf(stderr, "flag provided but not defined: %s\n", a);
        return main_usage_error(usage);
    }
    return -1;
}

/* The checks and defaults of the configuration once flags and environment are in; -1 when
 * the program goes on, else its exit code after saying why. */
static int settle_config(agent_config *cfg, const char *timeout)
{
    if (!cfg->homedir || !*cfg->homedir || cfg->homedir[0] != '/') {
        fprintf(stderr, "sandboxed-tools: -homedir must be an absolute path\n");
        return 2;
    }
    if (timeout) {
        usec_t us;
        if (parse_go_duration(timeout, &us) < 0 || us == 0) {
            fprintf(stderr, "sandboxed-tools: invalid -tool-timeout \"%s\" (e.g. 30s, 2m)\n",
                    timeout);
            return 2;
        }
        cfg->tool_timeout_ms = (long)(us / 1000) > 0 ? (long)(us / 1000) : 1;
    }
    if (cfg->pool && !*cfg->pool)
        cfg->pool = NULL;
    cfg->log_cb = log_stderr;
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    if (agent_config_from_env(cfg, &err) < 0) {
        fprintf(stderr, "sandboxed-tools: %s\n", err.message);
        return 1;
    }
    if (cfg->toolset && strcmp(cfg->toolset, "basic") != 0 &&
        strcmp(cfg->toolset, "geminicli") != 0) {
        fprintf(stderr, "sandboxed-tools: unknown toolset \"%s\" (known: basic, geminicli)\n",
                cfg->toolset);
        return 2;
    }
    return -1;
}

/* The conversation: a prompt a line, until end of input or /exit. */
static void repl(agent_session *s, const agent_callbacks *cbs)
{
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        fputs("User> ", stdout);
        fflush(stdout);
        if (getline(&line, &cap, stdin) < 0) {
            putchar('\n');
            break;
        }
        char *text = trim(line);
        if (!*text)
            continue;
        if (strcasecmp(text, "/exit") == 0 || strcasecmp(text, "/quit") == 0)
            break;
        cancel_flag = 0;
        in_turn = 1;
        agent_stop_reason stop;
        api_error_clear(&err);
        int r = agent_session_prompt(s, text, cbs, &stop, &err);
        in_turn = 0;
        if (r < 0)
            fprintf(stderr, "error: %s\n", err.message ? err.message : strerror(-r));
        else if (stop != AGENT_STOP_END_TURN)
            fprintf(stderr, "(turn ended: %s)\n", agent_stop_reason_name(stop));
        fflush(stdout);
    }
    free(line);
}

int main(int argc, char **argv)
{
    agent_config cfg = AGENT_CONFIG_INIT;
    const char *session = NULL, *timeout = NULL, *delete_session = NULL;
    cfg.homedir = env_or("SANDBOX_HOME_DIR", "/home/clawtainer");
    cfg.ns = env_or("SANDBOX_NAMESPACE", "default");
    int ret = parse_flags(argc, argv, &cfg, &session, &timeout, &delete_session);
    if (ret >= 0)
        return ret;
    if (delete_session)
        return delete_one_session(&cfg, delete_session);
    _cleanup_free_ char *generated = NULL;
    if (!session && cfg.fork_from && !env_or("SESSION_NAME", NULL)) {
        if (agent_session_name_generate(&generated) < 0)
            return 1;
        session = generated;
    }
    if (!session)
        session = env_or("SESSION_NAME", "default");
    if (!agent_session_name_valid(session)) {
        fprintf(stderr,
                "sandboxed-tools: invalid session name \"%s\": use 1 to 40 characters of "
                "[a-z0-9]\n",
                session);
        return 2;
    }
    if (cfg.fork_from) {
        int r = check_fork(&cfg, session);
        if (r != 0)
            return r;
    }
    if ((ret = settle_config(&cfg, timeout)) >= 0)
        return ret;
    if (agent_global_init() < 0) {
        fprintf(stderr, "sandboxed-tools: cannot initialise libcurl\n");
        return 1;
    }
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    agent_session *s = NULL;
    int r = agent_session_new(&s, &cfg, session, &err);
    if (r < 0) {
        fprintf(stderr, "sandboxed-tools: %s\n", err.message ? err.message : strerror(-r));
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);

    agent_callbacks cbs = AGENT_CALLBACKS_INIT;
    cbs.user_text_cb = print_user;
    cbs.agent_text_cb = print_agent;
    if (agent_session_history_length(s) > 1) {
        fprintf(stderr, "Resuming session %s\n", session);
        agent_session_replay(s, &cbs);
    }
    cbs.user_text_cb = NULL;
    cbs.tool_call_cb = print_tool;
    cbs.tool_result_cb = print_result;
    cbs.cancel = &cancel_flag;
    repl(s, &cbs);
    agent_session_free(s);
    return 0;
}
