/* sandboxd command line: upstream's flags with Go `flag` package semantics. */
#include "sandboxd/sandboxd.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/parse-util.h"

typedef enum { FLAG_STRING, FLAG_INT, FLAG_DURATION, FLAG_BOOL } flag_type;

typedef struct flag_def {
    const char *name;
    flag_type type;
    const char *usage;
    const char *default_text; /* printed as (default X) when non-NULL */
} flag_def;

static const flag_def flag_defs[] = {
    {"grpc-fd", FLAG_INT, "inherited listening socket fd for gRPC (set by the host)", NULL},
    {"grpc-port", FLAG_INT, "gRPC listen port", "9090"},
    {"grpc-socket", FLAG_STRING, "also serve gRPC on this unix socket path", NULL},
    {"http-idle-timeout", FLAG_DURATION, "HTTP keep-alive idle timeout", "1m0s"},
    {"header-timeout", FLAG_DURATION,
     "time a REST client has to send a request's headers (Go's ReadHeaderTimeout)", "10s"},
    {"listen-host", FLAG_STRING, "interface both listeners bind to", "\"0.0.0.0\""},
    {"max-connections", FLAG_INT,
     "open REST connections (all listeners); at the cap a new connection closes the oldest one "
     "still sending its request head or idle",
     "512"},
    {"max-execute-output", FLAG_INT,
     "bytes of Execute stdout+stderr kept in the reply; the rest is read and dropped (<=0: "
     "default, which fits a default gRPC client's 4 MiB message limit)",
     "4194240"},
    {"metadata-env-prefix", FLAG_STRING, "environment prefix exposed by /v1/metadata", "\"SANDBOX_\""},
    {"rest-fd", FLAG_INT, "inherited listening socket fd for REST (set by the host)", NULL},
    {"rest-port", FLAG_INT, "REST listen port", "8080"},
    {"rest-socket", FLAG_STRING, "also serve REST on this unix socket path", NULL},
    {"root-dir", FLAG_STRING, "sandbox root directory", "\"/workspace\""},
    {"shutdown-timeout", FLAG_DURATION, "hard bound on graceful shutdown", "10s"},
    {"stream-chunk-size", FLAG_INT, "read size for Start output chunks (<=0 means 4096)", NULL},
    {"version", FLAG_BOOL, "print version and exit", NULL},
    {"zap-devel", FLAG_BOOL, "accepted for compatibility; ignored", NULL},
    {"zap-encoder", FLAG_STRING, "log encoding: json or console", NULL},
    {"zap-log-level", FLAG_STRING, "accepted for compatibility; ignored", NULL},
    {"zap-stacktrace-level", FLAG_STRING, "accepted for compatibility; ignored", NULL},
    {"zap-time-encoding", FLAG_STRING, "accepted for compatibility; ignored", NULL},
};

static void print_usage(FILE *f)
{
    static const char *const type_names[] = {"string", "int", "duration", ""};
    fprintf(f, "Usage of sandboxd:\n");
    for (size_t i = 0; i < sizeof(flag_defs) / sizeof(flag_defs[0]); i++) {
        const flag_def *d = &flag_defs[i];
        fprintf(f, "  -%s%s%s\n    \t%s", d->name, *type_names[d->type] ? " " : "",
                type_names[d->type], d->usage);
        if (d->default_text)
            fprintf(f, " (default %s)", d->default_text);
        fputc('\n', f);
    }
}

static int replace_string(char **slot, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*slot);
    *slot = copy;
    return 0;
}

static int set_flag(sandboxd_config *cfg, const flag_def *d, const char *value, bool *version)
{
    int64_t n = 0;
    usec_t u = 0;
    bool b = false;
    int r = 0;
    switch (d->type) {
    case FLAG_INT:
        r = parse_go_int(value, &n);
        if (r == 0 && (n < INT32_MIN || n > INT32_MAX))
            r = -ERANGE;
        break;
    case FLAG_DURATION:
        r = parse_go_duration(value, &u);
        break;
    case FLAG_BOOL:
        r = parse_go_bool(value, &b);
        break;
    case FLAG_STRING:
        break;
    }
    if (r < 0) {
        fprintf(stderr, "invalid value \"%s\" for flag -%s: %s\n", value, d->name,
                r == -ERANGE ? "value out of range" : "parse error");
        return r;
    }
    const char *name = d->name;
    if (!strcmp(name, "grpc-fd")) cfg->grpc_fd = (int)n;
    else if (!strcmp(name, "grpc-port")) cfg->grpc_port = (int)n;
    else if (!strcmp(name, "grpc-socket")) r = replace_string(&cfg->grpc_socket, value);
    else if (!strcmp(name, "header-timeout")) cfg->header_timeout = u;
    else if (!strcmp(name, "http-idle-timeout")) cfg->http_idle_timeout = u;
    else if (!strcmp(name, "listen-host")) r = replace_string(&cfg->listen_host, value);
    else if (!strcmp(name, "max-connections")) cfg->max_connections = (int)n;
    else if (!strcmp(name, "max-execute-output")) cfg->max_execute_output = (int)n;
    else if (!strcmp(name, "metadata-env-prefix")) r = replace_string(&cfg->metadata_env_prefix, value);
    else if (!strcmp(name, "rest-fd")) cfg->rest_fd = (int)n;
    else if (!strcmp(name, "rest-port")) cfg->rest_port = (int)n;
    else if (!strcmp(name, "rest-socket")) r = replace_string(&cfg->rest_socket, value);
    else if (!strcmp(name, "root-dir")) r = replace_string(&cfg->root_dir, value);
    else if (!strcmp(name, "shutdown-timeout")) cfg->shutdown_timeout = u;
    else if (!strcmp(name, "stream-chunk-size")) cfg->stream_chunk_size = (int)n;
    else if (!strcmp(name, "version")) *version = b;
    else if (!strcmp(name, "zap-encoder")) cfg->log_json = !strcmp(value, "json");
    return r;
}

static const flag_def *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(flag_defs) / sizeof(flag_defs[0]); i++)
        if (strlen(flag_defs[i].name) == len && !strncmp(flag_defs[i].name, name, len))
            return &flag_defs[i];
    return NULL;
}

static int config_defaults(sandboxd_config *cfg)
{
    *cfg = (sandboxd_config){
        .grpc_port = 9090,
        .rest_port = 8080,
        .shutdown_timeout = 10 * USEC_PER_SEC,
        .http_idle_timeout = 60 * USEC_PER_SEC,
        .header_timeout = 10 * USEC_PER_SEC,
        .max_connections = SANDBOXD_DEFAULT_MAX_CONNECTIONS,
        .max_execute_output = SANDBOXD_DEFAULT_MAX_EXECUTE_OUTPUT,
        .rest_fd = -1,
        .grpc_fd = -1,
        .main_output_fd = -1,
    };
    if (replace_string(&cfg->listen_host, "0.0.0.0") < 0 ||
        replace_string(&cfg->root_dir, "/workspace") < 0 ||
        replace_string(&cfg->metadata_env_prefix, "SANDBOX_") < 0)
        return -ENOMEM;
    return 0;
}

/* Returns index of the first non-flag argument, or an exit code encoded as -(code+1). */
static int parse_flags(sandboxd_config *cfg, int argc, char **argv, bool *version)
{
    int i = 1;
    while (i < argc) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        const char *name = a + 1 + (a[1] == '-');
        if (*name == '-' || *name == '=') {
            fprintf(stderr, "bad flag syntax: %s\n", a);
            print_usage(stderr);
            return -(2 + 1);
        }
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const flag_def *d = find_flag(name, len);
        if (!d) {
            if ((len == 1 && name[0] == 'h') || (len == 4 && !strncmp(name, "help", 4))) {
                print_usage(stderr);
                return -(0 + 1);
            }
            fprintf(stderr, "flag provided but not defined: -%.*s\n", (int)len, name);
            print_usage(stderr);
            return -(2 + 1);
        }
        i++;
        const char *value = eq ? eq + 1 : NULL;
        if (!value && d->type == FLAG_BOOL)
            value = "true";
        if (!value) {
            if (i >= argc) {
                fprintf(stderr, "flag needs an argument: -%s\n", d->name);
                print_usage(stderr);
                return -(2 + 1);
            }
            value = argv[i++];
        }
        int r = set_flag(cfg, d, value, version);
        if (r == -ENOMEM)
            return -(1 + 1);
        if (r < 0) {
            print_usage(stderr);
            return -(2 + 1);
        }
    }
    return i;
}

int sandboxd_config_parse(sandboxd_config *cfg, int argc, char **argv)
{
    bool version = false;
    if (config_defaults(cfg) < 0)
        return 1;
    int first = parse_flags(cfg, argc, argv, &version);
    if (first < 0)
        return -first - 1;
    if (version) {
        printf("sandboxd %s\n", SANDBOXD_VERSION);
        return 0;
    }
    cfg->main_command = calloc((size_t)(argc - first + 1), sizeof(char *));
    if (!cfg->main_command)
        return 1;
    for (int k = first; k < argc; k++)
        if (!(cfg->main_command[k - first] = strdup(argv[k])))
            return 1;
    if (!*cfg->metadata_env_prefix && replace_string(&cfg->metadata_env_prefix, "SANDBOX_") < 0)
        return 1;
    if (cfg->grpc_port < 1 || cfg->grpc_port > 65535) {
        fprintf(stderr, "--grpc-port must be in range 1-65535 (got %d)\n", cfg->grpc_port);
        return 1;
    }
    if (cfg->rest_port < 1 || cfg->rest_port > 65535) {
        fprintf(stderr, "--rest-port must be in range 1-65535 (got %d)\n", cfg->rest_port);
        return 1;
    }
    if (cfg->grpc_port == cfg->rest_port) {
        fprintf(stderr, "--grpc-port and --rest-port must differ (both %d)\n", cfg->grpc_port);
        return 1;
    }
    return -1;
}

void sandboxd_config_done(sandboxd_config *cfg)
{
    free(cfg->listen_host);
    free(cfg->root_dir);
    free(cfg->metadata_env_prefix);
    free(cfg->rest_socket);
    free(cfg->grpc_socket);
    if (cfg->main_command)
        for (char **p = cfg->main_command; *p; p++)
            free(*p);
    free(cfg->main_command);
    free(cfg->main_dir);
    free(cfg->main_workdir);
    *cfg = (sandboxd_config){.rest_fd = -1, .grpc_fd = -1, .main_output_fd = -1};
}
