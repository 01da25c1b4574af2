/* Pure parts of the agent: response parsing, error texts, the fake model, the basic toolset's
 * schemas and result strings, session names, the session store and backup rotation/filtering. */
#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent-internal.h"
#include "unit.h"

TEST(parse_response_keeps_extra_fields)
{
    const char *body =
        "{\"id\":\"c\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
        "null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
        "\"ls\",\"arguments\":\"{\\\"path\\\": \\\".\\\"}\"},\"extra_content\":{\"google\":{"
        "\"thought_signature\":\"AAA=\"}}},{\"id\":\"\",\"function\":{\"name\":\"read\","
        "\"arguments\":{\"path\":\"x\"}}}]},\"finish_reason\":\"stop\"}]}";
    json_t *m = NULL;
    char *fin = NULL;
    api_error err = API_ERROR_INIT;
    CHECK_INT_EQ(agent_openai_parse_response(body, strlen(body), &m, &fin, &err), 0);
    CHECK(err.message == NULL);
    CHECK_STR_EQ(fin, "stop");
    json_t *calls = json_object_get(m, "tool_calls");
    CHECK_INT_EQ(json_array_size(calls), 2);
    json_t *c0 = json_array_get(calls, 0), *c1 = json_array_get(calls, 1);
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(c0, "function"), "arguments")),
                 "{\"path\": \".\"}");
    CHECK_STR_EQ(json_string_value(json_object_get(
                     json_object_get(json_object_get(c0, "extra_content"), "google"),
                     "thought_signature")),
                 "AAA=");
    const char *id1 = json_string_value(json_object_get(c1, "id"));
    CHECK(id1 && strncmp(id1, "call_", 5) == 0);
    CHECK_STR_EQ(json_string_value(json_object_get(c1, "type")), "function");
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(c1, "function"), "arguments")),
                 "{\"path\":\"x\"}");
    json_decref(m);
    free(fin);
    api_error_clear(&err);
}

TEST(parse_response_errors)
{
    static const char *const bad[] = {
        "", "[]", "{\"choices\":[]}", "{\"choices\":[{}]}",
        "{\"choices\":[{\"message\":{\"content\":5}}]}",
        "{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{}}]}}]}",
        "{\"choices\":[{\"message\":{\"tool_calls\":{}}}]}", "{\"error\":{\"message\":\"x\"}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *m = NULL;
        api_error err = API_ERROR_INIT;
        CHECK(agent_openai_parse_response(bad[i], strlen(bad[i]), &m, NULL, &err) < 0);
        CHECK(m == NULL);
        CHECK(err.message && strncmp(err.message, "llm: ", 5) == 0);
        CHECK(api_error_errno(&err) == -EBADMSG || api_error_errno(&err) == -EPROTO);
        api_error_clear(&err);
    }
}

TEST(error_text_shapes)
{
    const char *o = "{\"error\":{\"message\":\"m\",\"type\":\"t\",\"code\":\"c\"}}";
    char *s = agent_openai_error_text(400, o, strlen(o));
    CHECK_STR_EQ(s, "llm: api error (status 400): m (t, c)");
    free(s);
    const char *g = "[{\"error\":{\"code\":429,\"message\":\"q\",\"status\":\"RESOURCE_EXHAUSTED\"}}]";
    s = agent_openai_error_text(429, g, strlen(g));
    CHECK_STR_EQ(s, "llm: api error (status 429): q (RESOURCE_EXHAUSTED)");
    free(s);
    s = agent_openai_error_text(502, "bad gateway", 11);
    CHECK_STR_EQ(s, "llm: api error (status 502): bad gateway");
    free(s);
}

TEST(eliza)
{
    json_t *h = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "system", "content", "x", "role", "user",
                          "content", "What is the capital of France?");
    json_t *r = agent_eliza_reply(h, "run_command");
    CHECK_STR_EQ(json_string_value(json_object_get(r, "content")),
                 "What do you think it means when you say 'What is the capital of France?'?");
    json_decref(r);
    json_array_append_new(h, json_pack("{s:s,s:s}", "role", "user", "content", "run: uname -a"));
    r = agent_eliza_reply(h, "run_shell_command");
    json_t *fn = json_object_get(json_array_get(json_object_get(r, "tool_calls"), 0), "function");
    CHECK_STR_EQ(json_string_value(json_object_get(fn, "name")), "run_shell_command");
    CHECK_STR_EQ(json_string_value(json_object_get(fn, "arguments")), "{\"command\":\"uname -a\"}");
    const char *id = json_string_value(
        json_object_get(json_array_get(json_object_get(r, "tool_calls"), 0), "id"));
    json_array_append_new(h, r);
    json_array_append_new(h, json_pack("{s:s,s:s,s:s}", "role", "tool", "tool_call_id", id,
                                       "content", "Linux"));
    r = agent_eliza_reply(h, "run_shell_command");
    CHECK_STR_EQ(json_string_value(json_object_get(r, "content")),
                 "I ran `uname -a` with run_shell_command. The result was:\nLinux");
    json_decref(r);
    json_decref(h);
}

TEST(basic_schemas_and_strings)
{
    const agent_toolset *t = agent_toolset_find("basic");
    CHECK(t && agent_toolset_find(NULL) == t && !agent_toolset_find("nope"));
    json_t *tools = agent_toolset_tools(t);
    CHECK_INT_EQ(json_array_size(tools), 4);
    static const char *const names[] = {"ls", "read", "run_command", "write"};
    for (size_t i = 0; i < 4; i++) {
        json_t *fn = json_object_get(json_array_get(tools, i), "function");
        CHECK_STR_EQ(json_string_value(json_object_get(fn, "name")), names[i]);
    }
    json_t *w = json_object_get(json_object_get(json_array_get(tools, 3), "function"), "parameters");
    json_t *want = json_pack("[s,s]", "path", "content");
    CHECK(json_equal(json_object_get(w, "required"), want));
    json_decref(want);
    CHECK(!json_object_get(json_object_get(json_object_get(json_array_get(tools, 0), "function"),
                                           "parameters"),
                           "required"));
    json_decref(tools);

    agent_exec_result r = {.out = "hello\n", .err = "", .exit_code = 0};
    char *s = agent_basic_format_output(&r);
    CHECK_STR_EQ(s, "stdout:\nhello\n\nstderr:\n\nexit_code: 0");
    free(s);
    r = (agent_exec_result){.out = "", .err = "not found", .exit_code = 127};
    s = agent_basic_format_output(&r);
    CHECK_STR_EQ(s, "stdout:\n\nstderr:\nnot found\nexit_code: 127");
    free(s);
    s = agent_basic_format_failure("Failed to list", "d", &r);
    CHECK_STR_EQ(s, "Failed to list \"d\":\nstdout:\n\nstderr:\nnot found\nexit_code: 127");
    free(s);

    const agent_toolset *g = agent_toolset_find("geminicli");
    tools = agent_toolset_tools(g);
    CHECK_INT_EQ(json_array_size(tools), 8);
    json_decref(tools);
    CHECK_STR_EQ(agent_toolset_shell_tool(g), "run_shell_command");
    CHECK_STR_EQ(agent_toolset_kind("replace"), "edit");
    CHECK_STR_EQ(agent_toolset_kind("grep_search"), "search");
    CHECK_STR_EQ(agent_toolset_kind("whatever"), "other");
    s = agent_toolset_title("run_command", "{\"command\":\"ls -l\"}");
    CHECK_STR_EQ(s, "run_command: ls -l");
    free(s);
}

TEST(session_names)
{
    CHECK(agent_session_name_valid("abc123"));
    CHECK(!agent_session_name_valid(""));
    CHECK(!agent_session_name_valid("Abc"));
    CHECK(!agent_session_name_valid("a-b"));
    CHECK(!agent_session_name_valid("../x"));
    CHECK(agent_session_name_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    CHECK(!agent_session_name_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    char *n = NULL;
    CHECK_INT_EQ(agent_session_name_generate(&n), 0);
    CHECK(agent_session_name_valid(n));
    free(n);
}

TEST(store_round_trip)
{
    char tmpl[] = "/tmp/agent-unit-XXXXXX";
    CHECK(mkdtemp(tmpl) != NULL);
    json_t *h = NULL;
    api_error err = API_ERROR_INIT;
    CHECK_INT_EQ(agent_store_load(tmpl, &h, &err), 0);
    CHECK_INT_EQ(json_array_size(h), 0);
    json_decref(h);
    for (int i = 0; i < 4; i++) {
        json_t *m = json_pack("{s:s,s:i}", "role", "user", "n", i);
        CHECK_INT_EQ(agent_store_append(tmpl, m, &err), 0);
        json_decref(m);
    }
    CHECK_INT_EQ(agent_store_load(tmpl, &h, &err), 0);
    CHECK_INT_EQ(json_array_size(h), 4);
    CHECK(err.message == NULL);
    CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(h, 3), "n")), 3);
    json_decref(h);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
    CHECK(system(cmd) == 0);
}

/* A tar with a good file, an absolute name, a ../ escape and a device node. */
static char *hostile_tar(size_t *len)
{
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    static char buf[1 << 16];
    size_t used = 0;
    archive_write_open_memory(a, buf, sizeof(buf), &used);
    static const char *const names[] = {"./ok.txt", "/etc/evil", "../up", "a/../../up2", "dev"};
    for (size_t i = 0; i < 5; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_filetype(e, i == 4 ? AE_IFCHR : AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, i == 4 ? 0 : 2);
        archive_write_header(a, e);
        if (i != 4)
            archive_write_data(a, "hi", 2);
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    *len = used;
    return buf;
}

TEST(backup_filter_and_rotate)
{
    char dir[] = "/tmp/agent-unit-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    api_error err = API_ERROR_INIT;
    size_t len;
    char *tar = hostile_tar(&len);
    char path[256];
    for (int i = 0; i < 7; i++) {
        snprintf(path, sizeof(path), "%s/backup-2026010%dT000000.tar.gz", dir, i + 1);
        CHECK_INT_EQ(agent_backup_write(path, tar, len, &err), 0);
    }
    char *latest = NULL;
    CHECK_INT_EQ(agent_backup_latest(dir, &latest), 0);
    CHECK_STR_EQ(latest, path);
    char *out = NULL;
    size_t out_len = 0;
    CHECK_INT_EQ(agent_backup_read(latest, &out, &out_len, &err), 0);
    /* Only ./ok.txt survived. */
    struct archive *a = archive_read_new();
    archive_read_support_format_tar(a);
    archive_read_open_memory(a, out, out_len);
    struct archive_entry *e;
    int n = 0;
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
        CHECK_STR_EQ(archive_entry_pathname(e), "./ok.txt");
        n++;
    }
    CHECK_INT_EQ(n, 1);
    archive_read_free(a);
    free(out);
    free(latest);
    CHECK_INT_EQ(agent_backup_rotate(dir, 5), 0);
    snprintf(path, sizeof(path), "%s/backup-20260102T000000.tar.gz", dir);
    CHECK(access(path, F_OK) < 0);
    snprintf(path, sizeof(path), "%s/backup-20260103T000000.tar.gz", dir);
    CHECK(access(path, F_OK) == 0);
    CHECK(agent_backup_read("/nonexistent.tar.gz", &out, &out_len, &err) < 0);
    CHECK(err.message && strstr(err.message, "/nonexistent.tar.gz") != NULL);
    api_error_clear(&err);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}
