/* geminicli-toolbox helpers: glob matching ('**', braces, case folding), brace expansion,
 * UTF-8 sanitizing and the read_file line window. */
#include <stdlib.h>
#include <string.h>

#include "basic/strv.h"
#include "toolbox/toolbox.h"
#include "unit.h"

TEST(glob_segments_and_globstar)
{
    CHECK(toolbox_glob_match("*.c", "a.c", false));
    CHECK(!toolbox_glob_match("*.c", "src/a.c", false)); /* '*' stays in one segment */
    CHECK(toolbox_glob_match("**/*.c", "a.c", false));   /* '**' matches zero segments */
    CHECK(toolbox_glob_match("**/*.c", "src/deep/a.c", false));
    CHECK(toolbox_glob_match("src/**", "src/x/y", false));
    CHECK(toolbox_glob_match("src/**/y", "src/y", false));
    CHECK(!toolbox_glob_match("src/**/y", "lib/y", false));
    CHECK(toolbox_glob_match("./a/*", "a/b", false));
    CHECK(toolbox_glob_match("*", ".hidden", false)); /* dotfiles included */
    CHECK(toolbox_glob_match("a?[0-9].txt", "ab7.txt", false));
}

TEST(glob_case_and_braces)
{
    CHECK(toolbox_glob_match("*.MD", "readme.md", true));
    CHECK(!toolbox_glob_match("*.MD", "readme.md", false));
    CHECK(toolbox_glob_match("**/*.{ts,tsx}", "a/b.tsx", false));
    CHECK(toolbox_glob_match("{src,lib}/**/*.{c,{h,hpp}}", "lib/x/y.hpp", false));
    CHECK(!toolbox_glob_match("{src,lib}/*.c", "test/a.c", false));
    CHECK(toolbox_glob_match("{a}", "{a}", false)); /* no comma: literal */
}

TEST(brace_expand)
{
    char **v = toolbox_brace_expand("x{a,b{1,2}}y");
    CHECK(v != NULL);
    CHECK_STR_EQ(v[0], "xay");
    CHECK_STR_EQ(v[1], "xb1y");
    CHECK_STR_EQ(v[2], "xb2y");
    CHECK(v[3] == NULL);
    strv_free(v);
    /* exponential input is capped */
    char big[200] = "";
    for (int i = 0; i < 20; i++)
        strcat(big, "{a,b}");
    v = toolbox_brace_expand(big);
    size_t n = 0;
    while (v && v[n])
        n++;
    CHECK(n > 0 && n <= 1024);
    strv_free(v);
}

TEST(pathological_globstar_gives_up)
{
    char pat[400] = "", path[400] = "";
    for (int i = 0; i < 40; i++) {
        strcat(pat, "**/");
        strcat(path, "a/");
    }
    strcat(pat, "b");
    strcat(path, "c");
    CHECK(!toolbox_glob_match(pat, path, false));
}

TEST(utf8_sanitize)
{
    char *s = toolbox_utf8_sanitize("ok \xc3\xa9 \xe9 \xf0\x9f\x98\x80 \xed\xa0\x80", 16);
    CHECK_STR_EQ(s,
                 "ok \xc3\xa9 \xef\xbf\xbd \xf0\x9f\x98\x80 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
}

TEST(text_slice)
{
    toolbox_text t;
    const char *d = "a\nb\nc\n";
    toolbox_text_slice(d, strlen(d), 0, 2000, &t);
    CHECK_STR_EQ(t.content, "a\nb\nc\n");
    CHECK_INT_EQ(t.total, 4);
    CHECK(!t.truncated);
    free(t.content);
    toolbox_text_slice(d, strlen(d), 1, 2, &t);
    CHECK_STR_EQ(t.content, "b");
    CHECK_INT_EQ(t.first, 2);
    CHECK_INT_EQ(t.last, 2);
    CHECK(t.truncated);
    free(t.content);
}
