/* The built-in fake model ("fake-eliza"): reflects the user's words back as a question, and for
 * "run: <command>" asks for the toolset's shell tool, then reports its result. Needs no key and
 * no network, so the whole loop (tools, sandbox, sessions) can be tested end to end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent-internal.h"

static json_t *text_reply(const char *text)
{
    return json_pack("{s:s, s:s}", "role", "assistant", "content", text);
}

static json_t *reply_to_tool(json_t *messages, size_t last)
{
    /* The tool results of the latest round, and the commands asked for. */
    size_t first = last;
    while (first > 0 && strcmp(json_string_value(json_object_get(json_array_get(messages, first - 1),
                                                                 "role")) ?: "",
                               "tool") == 0)
        first--;
    json_t *asked = first > 0 ? json_array_get(messages, first - 1) : NULL;
    json_t *calls = json_object_get(asked, "tool_calls");
    char *out = strdup("");
    for (size_t i = first; i <= last && out; i++) {
        json_t *m = json_array_get(messages, i);
        const char *id = json_string_value(json_object_get(m, "tool_call_id")) ?: "";
        const char *content = json_string_value(json_object_get(m, "content")) ?: "";
        const char *tool = "a tool", *cmd = NULL;
        json_t *args = NULL, *c;
        size_t k;
        json_array_foreach(calls, k, c)
        {
            if (strcmp(json_string_value(json_object_get(c, "id")) ?: "", id) != 0)
                continue;
            json_t *fn = json_object_get(c, "function");
            tool = json_string_value(json_object_get(fn, "name")) ?: tool;
            args = json_loads(json_string_value(json_object_get(fn, "arguments")) ?: "", 0, NULL);
            cmd = json_string_value(json_object_get(args, "command"));
        }
        char *n = NULL;
        int rr = cmd ? asprintf(&n, "%s%sI ran `%s` with %s. The result was:\n%s", out,
                                *out ? "\n" : "", cmd, tool, content)
                     : asprintf(&n, "%s%s%s returned:\n%s", out, *out ? "\n" : "", tool, content);
        json_decref(args);
        free(out);
        out = rr < 0 ? NULL : n;
    }
    json_t *r = out ? text_reply(out) : NULL;
    free(out);
    return r;
}

json_t *agent_eliza_reply(json_t *messages, const char *shell_tool)
{
    size_t n = json_array_size(messages);
    if (n == 0)
        return text_reply("Hello. What would you like to talk about?");
    json_t *last = json_array_get(messages, n - 1);
    const char *role = json_string_value(json_object_get(last, "role")) ?: "";
    if (strcmp(role, "tool") == 0)
        return reply_to_tool(messages, n - 1);
    const char *text = json_string_value(json_object_get(last, "content")) ?: "";
    if (strncmp(text, "run:", 4) == 0) {
        const char *cmd = text + 4;
        while (*cmd == ' ' || *cmd == '\t')
            cmd++;
        json_t *args = json_pack("{s:s}", "command", cmd);
        char *a = args ? json_dumps(args, JSON_COMPACT) : NULL;
        json_decref(args);
        if (!a)
            return NULL;
        char id[48];
        snprintf(id, sizeof(id), "call_eliza_%zu", n);
        json_t *r = json_pack("{s:s, s:n, s:[{s:s, s:s, s:{s:s, s:s}}]}", "role", "assistant",
                              "content", "tool_calls", "id", id, "type", "function", "function",
                              "name", shell_tool, "arguments", a);
        free(a);
        return r;
    }
    char *q = NULL;
    if (asprintf(&q, "What do you think it means when you say '%s'?", text) < 0)
        return NULL;
    json_t *r = text_reply(q);
    free(q);
    return r;
}
