/* Internals of the agent: model clients, the fake model, toolsets, session storage and the
 * session's sandbox. Not part of agent-loop.h's stable API. */
#ifndef AGENT_INTERNAL_H
#define AGENT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include <asb/client.h>

#include "agent/agent-loop.h"

#define AGENT_DEFAULT_BASE_URL "https://generativelanguage.googleapis.com/v1beta/openai"
#define AGENT_DEFAULT_MODEL "gemini-3.5-flash"
#define AGENT_DEFAULT_HOMEDIR "/home/clawtainer"
#define AGENT_DEFAULT_IMAGE "host"
#define AGENT_FAKE_MODEL "fake-eliza"
#define AGENT_BACKUPS_KEPT 5
#define AGENT_TTL_SECONDS 300

/* ---- OpenAI chat completions (agent-openai.c) ---- */

/* Parses a chat.completion response body: *ret_message is choices[0].message exactly as sent
 * (extra fields such as extra_content kept), with empty tool call ids replaced by generated
 * ones; *ret_finish the finish_reason (or NULL). Returns 0, or -EBADMSG with a message. */
int agent_openai_parse_response(const char *body, size_t len, json_t **ret_message,
                                char **ret_finish, api_error *err);

/* Text for a non-2xx reply: "llm: api error (status N): <message>" with the message taken from
 * an OpenAI error object, a Google error array, or the raw body. */
char *agent_openai_error_text(long status, const char *body, size_t len);

typedef struct agent_openai agent_openai;

agent_openai *agent_openai_new(const char *base_url, const char *api_key, const char *model);
agent_openai *agent_openai_free(agent_openai *c);

/* One chat completion (retried on 429/5xx and connection failures with backoff). messages and
 * tools are borrowed. Returns 0, -ECANCELED, or -EIO/-EPROTO with *err. */
int agent_openai_chat(agent_openai *c, json_t *messages, json_t *tools, const volatile int *cancel,
                      agent_log_cb log_cb, void *log_payload, json_t **ret_message,
                      char **ret_finish, api_error *err);

/* ---- The fake model (agent-eliza.c) ---- */

/* The fake model's reply to the conversation so far (an assistant message). shell_tool is the
 * active toolset's shell tool name. Never NULL except on ENOMEM. */
json_t *agent_eliza_reply(json_t *messages, const char *shell_tool);

/* ---- Tool execution in the sandbox (agent-sandbox.c) ---- */

typedef struct agent_exec_result {
    char *out;
    size_t out_len;
    char *err;
    size_t err_len;
    int exit_code;
    bool timed_out;
} agent_exec_result;

void agent_exec_result_clear(agent_exec_result *r);

typedef struct agent_box agent_box;

/* A session's sandbox. Nothing is contacted until agent_box_ensure(). */
int agent_box_new(agent_box **ret, const agent_config *cfg, const char *session, const char *image,
                  const char *backup_dir, api_error *err);
agent_box *agent_box_free(agent_box *b);
const char *agent_box_name(const agent_box *b);
/* The home directory tools run in (-homedir; with -pool, the sandbox's root directory when the
 * pool's template has no writable home directory). */
const char *agent_box_homedir(const agent_box *b);

/* Makes sure the sandbox exists and is Ready (creating or claiming it, restoring the newest
 * backup into a new one) and pushes its shutdownTime to now+5 min. */
int agent_box_ensure(agent_box *b, const volatile int *cancel, api_error *err);

/* Runs argv in the sandbox with cwd = the home directory and HOME set; stdin_data (may be NULL)
 * is written to its stdin. timeout_ms 0: none; on timeout the process group is killed and
 * ret->timed_out set. Returns 0 (whatever the exit code), -ECANCELED, or -errno with a message. */
int agent_box_exec(agent_box *b, const char *const *argv, const char *stdin_data, size_t stdin_len,
                   long timeout_ms, const volatile int *cancel, agent_exec_result *ret,
                   api_error *err);

/* Copies a host file into the sandbox (for geminicli-toolbox) at path with mode. */
int agent_box_upload(agent_box *b, const char *host_path, const char *path, unsigned int mode,
                     api_error *err);

/* Archives the home directory into backup_dir/backup-<YYYYMMDDTHHMMSS>.tar.gz (atomic, newest 5
 * kept). */
int agent_box_snapshot(agent_box *b, api_error *err);

/* ---- Forks of another session's sandbox (agent-fork.c) ---- */

/* Makes the Sandbox `name` in ns a copy of session seed's sandbox (snapshot + fork, waited until
 * Ready, snapshot deleted afterwards) with shutdownTime `when` (policy Delete). Returns 0,
 * -ENOENT when seed has no sandbox (nothing made), or -errno with *err. */
int agent_fork_sandbox(asb_client *c, const char *ns, const char *seed, const char *name,
                       const char *when, const volatile int *cancel, api_error *err);

/* ---- Backups (agent-backup.c) ---- */

/* Re-compresses an uncompressed tar stream (from `tar -cf -` in the sandbox) into a gzip'd tar
 * at path (written to path.tmp, fsync'd, renamed), keeping only regular files, directories,
 * symlinks and hard links to a regular file earlier in the stream, all with relative,
 * non-escaping names; modes, owners and mtimes as the stream has them. */
int agent_backup_write(const char *path, const char *tar_data, size_t tar_len, api_error *err);
/* The same, reading the tar from in_fd (not closed) one block at a time: memory stays constant
 * whatever the size of the home directory. */
int agent_backup_write_fd(const char *path, int in_fd, api_error *err);

/* Reads a .tar.gz backup into an uncompressed tar in memory (*ret, malloc'd), with the same
 * filtering. */
int agent_backup_read(const char *path, char **ret, size_t *ret_len, api_error *err);
/* The same, writing the uncompressed tar to out_fd (not closed) one block at a time. */
int agent_backup_read_fd(const char *path, int out_fd, api_error *err);

/* The newest backup in dir (malloc'd path) or NULL in *ret when there is none. */
int agent_backup_latest(const char *dir, char **ret);

/* Deletes all but the newest `keep` backup-*.tar.gz files in dir. */
int agent_backup_rotate(const char *dir, size_t keep);

/* ---- Toolsets (agent-toolset.c) ---- */

typedef struct agent_toolset agent_toolset;

/* "basic" or "geminicli"; NULL when unknown. Static. */
const agent_toolset *agent_toolset_find(const char *name);
const char *agent_toolset_name(const agent_toolset *t);
const char *agent_toolset_system_prompt(const agent_toolset *t);
const char *agent_toolset_shell_tool(const agent_toolset *t);
/* A new reference to the tools array of the request (OpenAI function schemas). */
json_t *agent_toolset_tools(const agent_toolset *t);
/* ACP ToolKind of a tool name, and a title (malloc'd) for a call. */
const char *agent_toolset_kind(const char *tool);
char *agent_toolset_title(const char *tool, const char *arguments);

/* Runs one tool call. *ret_result is the text for the model (malloc'd); *ret_failed is set when
 * it is an error text. Returns 0, or -ECANCELED. */
int agent_toolset_call(const agent_toolset *t, agent_box *box, const agent_config *cfg,
                       const char *name, const char *arguments, const volatile int *cancel,
                       char **ret_result, bool *ret_failed);

/* The basic toolset's result formatting (also unit-tested). */
char *agent_basic_format_output(const agent_exec_result *r);
char *agent_basic_format_failure(const char *prefix, const char *path, const agent_exec_result *r);

/* ---- Session storage (agent-store.c) ---- */

/* <data_dir>/<session> (malloc'd); data_dir NULL: $HOME/.local/sandboxed-tools. */
int agent_store_session_dir(const agent_config *cfg, const char *session, char **ret);
/* Loads sessions/latest.jsonl into a new array (empty when missing). */
int agent_store_load(const char *session_dir, json_t **ret, api_error *err);
/* Takes the session's lock, <session_dir>/lock (flock, exclusive, created 0700/0600 as needed):
 * one process at a time uses a session, whatever the program. *ret_fd holds it (close to
 * release). Returns 0, -EBUSY with a message naming the holder (pid and program), or -errno. */
int agent_store_lock(const char *session_dir, const char *session, int *ret_fd, api_error *err);
/* Appends one message (one line) to sessions/latest.jsonl, creating dirs (0700) and file (0600). */
int agent_store_append(const char *session_dir, json_t *message, api_error *err);

#endif
