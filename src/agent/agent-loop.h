/* The agent loop as a library: sessions with a toolset, a model client and a sandbox, run one
 * user turn at a time. Used by sandboxed-tools (the CLI) and acp-server.
 *
 * Threads: call agent_global_init() once before any thread starts. One agent_session must be used
 * by one thread at a time; different sessions may run in parallel threads (each has its own
 * control-plane client, sandbox handle and HTTP handles). The cancel flag of a turn may be set
 * from any thread.
 *
 * Storage (shared with upstream's sandboxed-tools): <data_dir>/<session>/sessions/latest.jsonl
 * holds the history (one OpenAI chat message per line, appended as it happens) and
 * <data_dir>/<session>/fs/backup-<YYYYMMDDTHHMMSS>.tar.gz the newest 5 snapshots of the sandbox's
 * home directory.
 *
 * Errors: negative errno; where a person needs words, the function also takes `api_error *err`
 * (last parameter, never NULL) and fills it; the caller prints err->message (NULL when only the
 * errno is known) and calls api_error_clear(). */
#ifndef AGENT_LOOP_H
#define AGENT_LOOP_H

#include <stddef.h>

#include "shared/status.h"

/* Log levels (syslog numbering), as ASB_LOG_*. */
#define AGENT_LOG_ERROR 3
#define AGENT_LOG_WARNING 4
#define AGENT_LOG_INFO 6
#define AGENT_LOG_DEBUG 7

typedef void (*agent_log_cb)(int level, const char *message, void *payload);

/* Configuration of sessions; the strings are borrowed and must outlive every session made with
 * it. agent_config_from_env() fills it the way the CLI does. */
typedef struct agent_config {
    unsigned int version;     /* AGENT_CONFIG_VERSION */
    const char *base_url;     /* OpenAI-compatible base, e.g. "https://api.openai.com/v1"; a
                                 trailing '/' is ignored. NULL: Gemini's OpenAI endpoint */
    const char *api_key;      /* bearer key; may be NULL for the fake model */
    const char *model;        /* "fake-eliza" selects the built-in fake model */
    const char *toolset;      /* "basic" or "geminicli"; NULL: "basic" */
    const char *image;        /* sandbox image; NULL: "host" */
    const char *homedir;      /* home directory inside the sandbox; NULL: "/home/clawtainer" */
    const char *ns;           /* namespace; NULL: "default" */
    const char *pool;         /* claim from this SandboxWarmPool instead of creating a Sandbox;
                                 NULL: create */
    long tool_timeout_ms;     /* 0: no limit. A tool running longer is killed (its whole process
                                 group) and the model is told it timed out */
    const char *data_dir;     /* NULL: $HOME/.local/sandboxed-tools */
    const char *toolbox_path; /* host path of geminicli-toolbox; NULL: next to the executable */
    /* Control plane, as asb finds it: NULL means $ASB_SERVER / $ASB_TOKEN / $ASB_STATE_DIR. */
    const char *server;
    const char *token;
    const char *state_dir;
    int max_steps;            /* model round trips per user turn; 0: 50 */
    agent_log_cb log_cb;      /* warnings (restore failed, retrying, ...); may be NULL */
    void *log_payload;
    const char *fork_from;    /* a new session's first sandbox is a copy of this session's
                                 sandbox (or, when it has none, starts with its newest backup);
                                 not with pool. NULL: none */
} agent_config;

#define AGENT_CONFIG_VERSION 1
/* clang-format off */
#define AGENT_CONFIG_INIT {AGENT_CONFIG_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                           0, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL}
/* clang-format on */

/* Call once per process before anything else (curl global init). Returns 0 or -errno. */
int agent_global_init(void);

/* Fills the model, key, base URL, toolset and image fields of cfg from OPENAI_BASE_URL,
 * GEMINI_API_KEY / OPENAI_API_KEY, OPENAI_MODEL (then MODEL), TOOLSET, SANDBOX_IMAGE, only where
 * the field is still NULL. The strings point into the environment. Returns -EINVAL with a
 * message when no key is set and the model is not fake. */
int agent_config_from_env(agent_config *cfg, api_error *err);

/* 1 when name is a valid session name (lowercase [a-z0-9], 1..40 characters), else 0. */
int agent_session_name_valid(const char *name);

/* A fresh random valid session name ("s" + 16 hex digits) into *ret (malloc'd). */
int agent_session_name_generate(char **ret);

/* 1 when a session with that name has stored history under cfg's data dir, else 0. */
int agent_session_exists(const agent_config *cfg, const char *name);

/* Removes session `name` for good: deletes its SandboxClaim (a -pool session's; its sandbox goes
 * with it) and the Sandbox named after it on the control plane (cfg's server, namespace cfg->ns),
 * then its directory (history, backups). Refused while a process holds the session (-EBUSY), for
 * a session that does not exist (-ENOENT), and when a delete fails (the directory is then kept).
 * *ret_summary (owned, NULL when out of memory) says what was deleted; err why not. */
int agent_session_delete(const agent_config *cfg, const char *name, char **ret_summary,
                         api_error *err);

typedef struct agent_session agent_session;

/* Opens (creating if needed) session `name` and loads its stored history. No sandbox is touched
 * until the first tool call. *ret is owned by the caller (agent_session_free).
 * Returns 0, -EINVAL (bad name, unknown toolset), -EIO/-errno (unreadable history). */
int agent_session_new(agent_session **ret, const agent_config *cfg, const char *name,
                      api_error *err);

/* Frees a session. The sandbox is left alive; its shutdownTime collects it. Accepts NULL and
 * returns NULL. */
agent_session *agent_session_free(agent_session *s);

/* Borrowed, valid while the session lives. */
const char *agent_session_name(const agent_session *s);
const char *agent_session_toolset(const agent_session *s);
/* The sandbox (or claim, with a pool) currently used, or NULL before the first tool call. */
const char *agent_session_sandbox(const agent_session *s);

/* Number of messages in the history (including the system prompt). */
size_t agent_session_history_length(const agent_session *s);

/* A tool call as the callbacks see it; every field is borrowed for the duration of the call. */
typedef struct agent_tool_call {
    const char *id;        /* tool call id from the model */
    const char *name;      /* tool name, e.g. "run_command" */
    const char *arguments; /* JSON text as the model sent it (may be invalid JSON) */
    const char *title;     /* short human title, e.g. "run_command: uname -a" */
    const char *kind;      /* ACP ToolKind: "read", "edit", "search", "execute", "other" ... */
} agent_tool_call;

typedef enum agent_permission {
    AGENT_PERMISSION_ALLOW_ONCE = 0,
    AGENT_PERMISSION_ALLOW_ALWAYS = 1,  /* allow, and do not ask again for this tool name in
                                           this session */
    AGENT_PERMISSION_REJECT_ONCE = 2,
    AGENT_PERMISSION_REJECT_ALWAYS = 3, /* reject, and reject this tool name from now on */
    AGENT_PERMISSION_CANCELLED = 4,     /* the turn is being cancelled */
} agent_permission;

typedef enum agent_tool_status {
    AGENT_TOOL_COMPLETED = 0,
    AGENT_TOOL_FAILED = 1, /* tool error, rejection, timeout, bad arguments */
} agent_tool_status;

typedef enum agent_stop_reason {
    AGENT_STOP_END_TURN = 0,
    AGENT_STOP_MAX_TOKENS = 1,
    AGENT_STOP_MAX_TURN_REQUESTS = 2,
    AGENT_STOP_REFUSAL = 3,
    AGENT_STOP_CANCELLED = 4,
} agent_stop_reason;

/* ACP name of a stop reason ("end_turn", "max_tokens", ...). Static string. */
const char *agent_stop_reason_name(agent_stop_reason r);

/* Callbacks of a turn, all called on the thread running agent_session_prompt() (or
 * agent_session_replay()). Each may be NULL. */
typedef struct agent_callbacks {
    unsigned int version; /* AGENT_CALLBACKS_VERSION */
    /* A piece of user text (only during replay). */
    void (*user_text_cb)(const char *text, void *payload);
    /* A piece of assistant text (the whole message of one model reply). */
    void (*agent_text_cb)(const char *text, void *payload);
    /* The model asked for a tool call; called before permission is asked. */
    void (*tool_call_cb)(const agent_tool_call *call, void *payload);
    /* Decide whether the call may run. NULL: allow everything. Not called during replay, nor for
     * tool names already answered "always". */
    agent_permission (*permission_cb)(const agent_tool_call *call, void *payload);
    /* The call ended; result is the text sent back to the model. */
    void (*tool_result_cb)(const agent_tool_call *call, agent_tool_status status,
                           const char *result, void *payload);
    void *payload;
    /* When *cancel becomes non-zero (any thread) the turn ends with AGENT_STOP_CANCELLED as soon
     * as possible: the model request is aborted, a running tool is killed. May be NULL. */
    const volatile int *cancel;
    /* (version >= 2) The call is allowed and starts running now: after permission_cb, or
     * without it for a tool name answered "allow always" earlier. Never called for a rejected
     * or cancelled call, nor during replay. */
    void (*tool_start_cb)(const agent_tool_call *call, void *payload);
} agent_callbacks;

#define AGENT_CALLBACKS_VERSION 2
/* clang-format off */
#define AGENT_CALLBACKS_INIT {AGENT_CALLBACKS_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                              NULL}
/* clang-format on */

/* Runs one user turn: appends the user message, then calls the model and runs the tools it asks
 * for (inside the session's sandbox, created/claimed/restored as needed) until it answers without
 * tool calls, the step cap is hit, or the turn is cancelled. Every message is appended to the
 * stored history as it happens; after a round in which tools ran the home directory is
 * snapshotted. *ret_stop (may be NULL) gets why the turn ended.
 * Returns 0, or -errno with *err for model/API failures (the history stays consistent:
 * the user message is kept, so the next turn can go on). */
int agent_session_prompt(agent_session *s, const char *user_text, const agent_callbacks *cbs,
                         agent_stop_reason *ret_stop, api_error *err);

/* Replays the stored history through the callbacks, in order: user text, assistant text, tool
 * calls (tool_call_cb then tool_result_cb with the stored result). The system prompt is skipped.
 * Returns 0. */
int agent_session_replay(agent_session *s, const agent_callbacks *cbs);

#endif
