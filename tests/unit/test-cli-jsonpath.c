/* kubectl's JSONPath templates of `asb get -o jsonpath=` / `custom-columns=`. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/asb-jsonpath.h"
#include "unit.h"

static const char doc[] =
    "{\"items\": [{\"metadata\": {\"name\": \"a\", \"labels\": {\"x.io/t\": \"w\"}},"
    "  \"status\": {\"conditions\": [{\"type\": \"Ready\", \"status\": \"True\"}], \"n\": 3}},"
    " {\"metadata\": {\"name\": \"b\"}, \"status\": {\"conditions\": []}}]}";

/* The rendering of template (owned), or NULL with *ret_r the error. */
static char *render(const char *template, int *ret_r)
{
    json_t *root = json_loads(doc, 0, NULL);
    buf out = BUF_INIT;
    api_error err = API_ERROR_INIT;
    *ret_r = cli_jsonpath_render(&out, template, root, &err);
    json_decref(root);
    if (*ret_r < 0) {
        if (*ret_r == -EINVAL && !err.message)
            *ret_r = -EBADMSG; /* a syntax error must say where */
        api_error_clear(&err);
        buf_done(&out);
        return NULL;
    }
    char *s = out.data ? buf_steal(&out, NULL) : strdup("");
    return s;
}

#define CHECK_RENDER(template, want)                                                               \
    do {                                                                                           \
        int _r;                                                                                    \
        char *_s = render(template, &_r);                                                          \
        CHECK_INT_EQ(_r, 0);                                                                       \
        CHECK_STR_EQ(_s, want);                                                                    \
        free(_s);                                                                                  \
    } while (0)

#define CHECK_SYNTAX_ERROR(template)                                                               \
    do {                                                                                           \
        int _r;                                                                                    \
        char *_s = render(template, &_r);                                                          \
        CHECK_INT_EQ(_r, -EINVAL);                                                                 \
        CHECK(_s == NULL);                                                                         \
    } while (0)

TEST(paths)
{
    CHECK_RENDER("{.items[*].metadata.name}", "a b");
    CHECK_RENDER("{.items[0].metadata.name}", "a");
    CHECK_RENDER("{.items[-1].metadata.name}", "b");
    CHECK_RENDER("{$.items[1].metadata.name}", "b");
    CHECK_RENDER("{.items[0].metadata.labels.x\\.io/t}", "w");
    CHECK_RENDER("{.items[0].status.conditions[?(@.type==\"Ready\")].status}", "True");
    CHECK_RENDER("{.items[0].status.n}", "3");
    CHECK_RENDER("{.items[0].status.conditions[0]}", "{\"type\":\"Ready\",\"status\":\"True\"}");
    CHECK_RENDER("{.items[5].metadata.name}", "");
    CHECK_RENDER("{.missing.deeper}", "");
}

TEST(text_literals_and_range)
{
    CHECK_RENDER("names: {.items[*].metadata.name}!", "names: a b!");
    CHECK_RENDER("{\"a\\tb\\n\"}", "a\tb\n");
    CHECK_RENDER("{range .items[*]}{.metadata.name}={.status.n}{\"\\n\"}{end}", "a=3\nb=\n");
    CHECK_RENDER("{range .items[*]}[{range .status.conditions[*]}{.type}{end}]{end}", "[Ready][]");
    CHECK_RENDER("no actions", "no actions");
}

TEST(syntax_errors)
{
    CHECK_SYNTAX_ERROR("{.items[");
    CHECK_SYNTAX_ERROR("{.items[x]}");
    CHECK_SYNTAX_ERROR("{range .items[*]}{.a}");
    CHECK_SYNTAX_ERROR("{end}");
    CHECK_SYNTAX_ERROR("{items}");
    CHECK_SYNTAX_ERROR("{.items[?(@.a=1)]}");
}

TEST(values)
{
    json_t *root = json_loads(doc, 0, NULL), *vals = json_array();
    CHECK_INT_EQ(cli_jsonpath_values(root, ".items[*].metadata", vals), 0);
    CHECK_INT_EQ(json_array_size(vals), 2);
    json_array_clear(vals);
    CHECK_INT_EQ(cli_jsonpath_values(root, "", vals), 0);
    CHECK(json_array_get(vals, 0) == root);
    json_decref(vals);
    json_decref(root);
}

/* A syntax error says what is wrong, in an api_error. */
TEST(syntax_error_words)
{
    json_t *root = json_loads(doc, 0, NULL);
    _cleanup_buf_ buf out = BUF_INIT;
    api_error err = API_ERROR_INIT;
    CHECK_INT_EQ(cli_jsonpath_render(&out, "{end}", root, &err), -EINVAL);
    CHECK_STR_EQ(err.message, "end without range");
    CHECK_INT_EQ(err.code, STATUS_INVALID_ARGUMENT);
    CHECK_INT_EQ(cli_jsonpath_render(&out, "{.a", root, &err), -EINVAL);
    CHECK_STR_EQ(err.message, "unclosed action");
    CHECK_INT_EQ(cli_jsonpath_render(&out, "{.a}", root, NULL), 0); /* err is optional */
    api_error_clear(&err);
    json_decref(root);
}
