/* acp-server [--listen HOST:PORT] [--allow-unauthenticated] [--token-file PATH] [--namespace NS]
 *            [--toolset NAME] [--image IMAGE] [--log-json]
 * Serves the agent loop over the Agent Client Protocol (docs/acp.md). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/acp-server.h"
#include "asb/client.h"
#include "basic/macro.h"
#include "shared/main-usage.h"
#include "shared/log.h"

static acp_server *the_server;

static void on_signal(int sig)
{
    if (the_server)
        acp_server_stop(the_server);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: acp-server [--listen HOST:PORT] [--allow-unauthenticated] [--token-file PATH]\n"
            "                  [--namespace NS] [--toolset basic|geminicli] [--image IMAGE] "
            "[--log-json]\n"
            "Serves the sandboxed agent over the Agent Client Protocol (JSON-RPC 2.0, one message\n"
            "per line) on TCP, default %s. Clients authenticate with the control-plane token\n"
            "(--token-file, else $ASB_TOKEN, else $ASB_STATE_DIR/token). The model and sandbox\n"
            "settings come from the environment as for sandboxed-tools (OPENAI_MODEL, ...).\n",
            ACP_DEFAULT_LISTEN);
}

/* Reads the token file, trimmed. Returns a malloc'd string or NULL. */
static char *read_token(const char *path)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return NULL;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return NULL;
    buf[n] = 0;
    char *s = buf;
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
        s++;
    size_t l = strlen(s);
    while (l > 0 && (s[l - 1] == ' ' || s[l - 1] == '\n' || s[l - 1] == '\t' || s[l - 1] == '\r'))
        s[--l] = 0;
    return l > 0 ? strdup(s) : NULL;
}

static void log_from_agent(int level, const char *message, void *payload)
{
    log_kv(level <= AGENT_LOG_ERROR     ? LOG_LEVEL_ERROR
           : level <= AGENT_LOG_WARNING ? LOG_LEVEL_WARN
           : level <= AGENT_LOG_INFO    ? LOG_LEVEL_INFO
                                        : LOG_LEVEL_DEBUG,
           message, NULL);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"allow-unauthenticated", no_argument, NULL, 'u'},
        {"token-file", required_argument, NULL, 't'},
        {"log-json", no_argument, NULL, 'j'},
        {"namespace", required_argument, NULL, 'n'},
        {"toolset", required_argument, NULL, 'T'},
        {"image", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    acp_server_config cfg = {.agent = AGENT_CONFIG_INIT};
    const char *token_file = NULL;
    bool log_json = false;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
        switch (c) {
        case 'l':
            cfg.listen = optarg;
            break;
        case 'u':
            cfg.allow_unauthenticated = true;
            break;
        case 't':
            token_file = optarg;
            break;
        case 'j':
            log_json = true;
            break;
        case 'n':
            cfg.agent.ns = optarg;
            break;
        case 'T':
            cfg.agent.toolset = optarg;
            break;
        case 'i':
            cfg.agent.image = optarg;
            break;
        default:
            return main_usage_option(c, usage);
        }
    }
    if (optind != argc)
        return main_usage_error(usage);
    log_setup("acp-server", log_json, LOG_LEVEL_INFO);
    signal(SIGPIPE, SIG_IGN);

    _cleanup_free_ char *token = NULL;
    if (token_file) {
        token = read_token(token_file);
        if (!token) {
            fprintf(stderr, "acp-server: cannot read a token from %s\n", token_file);
            return 1;
        }
    } else if (getenv("ASB_TOKEN") && *getenv("ASB_TOKEN")) {
        token = strdup(getenv("ASB_TOKEN"));
    } else {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        if (asb_client_default_state_dir(&dir) == 0 && asprintf(&path, "%s/token", dir) >= 0)
            token = read_token(path);
        else
            path = NULL;
    }
    cfg.token = token;

    api_error err = API_ERROR_INIT;
    int r = agent_global_init();
    if (r < 0) {
        fprintf(stderr, "acp-server: agent init failed: %s\n", strerror(-r));
        return 1;
    }
    r = agent_config_from_env(&cfg.agent, &err);
    if (r < 0) {
        fprintf(stderr, "acp-server: %s\n", err.message ? err.message : strerror(-r));
        api_error_clear(&err);
        return 1;
    }
    cfg.agent.log_cb = log_from_agent;

    acp_server *s = NULL;
    r = acp_server_new(&s, &cfg, &err);
    if (r < 0) {
        fprintf(stderr, "acp-server: %s\n", err.message ? err.message : strerror(-r));
        api_error_clear(&err);
        return 1;
    }
    the_server = s;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    log_info("acp-server listening", "address", acp_server_address(s), "auth",
             cfg.token && !(cfg.allow_unauthenticated) ? "token" : "none");
    r = acp_server_run(s);
    log_info("acp-server stopped");
    the_server = NULL;
    acp_server_free(s);
    return r < 0 ? 1 : 0;
}
