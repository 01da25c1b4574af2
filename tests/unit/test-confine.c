/* Path confinement: the upstream pathutil checklist (shared/spec/UPSTREAM.md §1.3) plus symlink
 * following, dangling links, loops and Go filepath.Clean vectors. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/confine.h"
#include "basic/macro.h"
#include "shared/status.h"
#include "unit.h"

static char base[PATH_MAX], root[PATH_MAX + 16], outside[PATH_MAX + 16];
static int root_fd = -1;

static void put(const char *rel)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
}

static void must_symlink(const char *target, const char *path)
{
    if (symlink(target, path) < 0) {
        perror("symlink");
        abort();
    }
}

static void setup(void)
{
    if (root_fd >= 0)
        return;
    char tmpl[] = "/tmp/test-confine-XXXXXX";
    char *b = mkdtemp(tmpl);
    char *real = realpath(b, NULL);
    snprintf(base, sizeof(base), "%s", real);
    free(real);
    snprintf(root, sizeof(root), "%s/workspace", base);
    snprintf(outside, sizeof(outside), "%s/outside", base);
    mkdir(root, 0755);
    mkdir(outside, 0755);
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/workspace-evil", base);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/secret", outside);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
    snprintf(p, sizeof(p), "%s/sub", root);
    mkdir(p, 0755);
    put("main.py");
    put("sub/file.txt");
    snprintf(p, sizeof(p), "%s/link", root);
    must_symlink(outside, p);
    snprintf(p, sizeof(p), "%s/inlink", root);
    must_symlink("sub/file.txt", p);
    snprintf(p, sizeof(p), "%s/abslink", root);
    char t[PATH_MAX * 2];
    snprintf(t, sizeof(t), "%s/sub", root);
    must_symlink(t, p);
    snprintf(p, sizeof(p), "%s/dangling", root);
    must_symlink("nope/missing", p);
    snprintf(p, sizeof(p), "%s/dangling-out", root);
    must_symlink("/nonexistent-dir-for-test/x", p);
    snprintf(p, sizeof(p), "%s/loop1", root);
    must_symlink("loop2", p);
    snprintf(p, sizeof(p), "%s/loop2", root);
    must_symlink("loop1", p);
    snprintf(p, sizeof(p), "%s/sub/up", root);
    must_symlink("../main.py", p);
    snprintf(p, sizeof(p), "%s/sub/upout", root);
    must_symlink("../../outside/secret", p);
    root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/* Resolves and renders "<dir relative to root>|<missing>|<name>" or "ERR <errno>". */
static char *resolve(const char *path)
{
    static char out[PATH_MAX * 3];
    confined c = CONFINED_INIT;
    int r = confine_resolve(root_fd, root, path, &c);
    if (r < 0) {
        snprintf(out, sizeof(out), "ERR %d", -r);
        return out;
    }
    char fdpath[64], dir[PATH_MAX + 1];
    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", c.dir_fd);
    ssize_t n = readlink(fdpath, dir, PATH_MAX);
    dir[n < 0 ? 0 : n] = '\0';
    const char *rel = strncmp(dir, root, strlen(root)) == 0 ? dir + strlen(root) : dir;
    snprintf(out, sizeof(out), "%s|%s|%s", *rel ? rel : "/", c.missing, c.name);
    confined_done(&c);
    return out;
}

static char escape_str[16];
static const char *ESC(void)
{
    snprintf(escape_str, sizeof(escape_str), "ERR %d", ERRNO_PATH_ESCAPE);
    return escape_str;
}

TEST(path_clean_go_vectors)
{
    const char *v[][2] = {
        {"", "."},          {".", "."},           {"abc", "abc"},       {"abc/", "abc"},
        {"a//b", "a/b"},    {"a/./b", "a/b"},     {"a/../b", "b"},      {"../a", "../a"},
        {"../../a/..", "../.."}, {"/../etc", "/etc"}, {"/", "/"},        {"//", "/"},
        {"a/b/../../..", ".."}, {"/a/b/../../..", "/"}, {"a/../../b", "../b"}, {"./..", ".."},
        {"..a/b", "..a/b"}, {"abc/def/..", "abc"},
    };
    for (size_t i = 0; i < ELEMENTSOF(v); i++) {
        char *c = path_clean(v[i][0]);
        CHECK_STR_EQ(c, v[i][1]);
        free(c);
    }
}

TEST(upstream_checklist)
{
    setup();
    CHECK_STR_EQ(resolve("main.py"), "/||main.py");
    CHECK_STR_EQ(resolve("."), "/||");
    CHECK_STR_EQ(resolve(""), "/||");
    CHECK_STR_EQ(resolve("../etc/passwd"), ESC());
    CHECK_STR_EQ(resolve("../../etc/passwd"), ESC());
    CHECK_STR_EQ(resolve("a/../../etc/passwd"), ESC());
    CHECK_STR_EQ(resolve(".."), ESC());
    CHECK_STR_EQ(resolve("/f.txt"), "/||f.txt");
    char full[PATH_MAX * 2];
    snprintf(full, sizeof(full), "%s/main.py", root);
    CHECK_STR_EQ(resolve(full), "/||main.py");
    CHECK_STR_EQ(resolve(root), "/||");
    CHECK_STR_EQ(resolve("/workspace-evil/f.txt"), "/|workspace-evil|f.txt");
    CHECK_STR_EQ(resolve("link/secret"), ESC());
    CHECK_STR_EQ(resolve("link/newfile.txt"), ESC());
    CHECK_STR_EQ(resolve("link/subdir/newfile.txt"), ESC());
    CHECK_STR_EQ(resolve("../workspace-evil/f.txt"), ESC());
    CHECK_STR_EQ(resolve("sub/dir/new.txt"), "/sub|dir|new.txt");
    CHECK_STR_EQ(resolve("/../etc"), "/||etc");
}

TEST(symlinks_inside_are_followed)
{
    setup();
    CHECK_STR_EQ(resolve("inlink"), "/sub||file.txt");
    CHECK_STR_EQ(resolve("abslink/file.txt"), "/sub||file.txt");
    CHECK_STR_EQ(resolve("abslink"), "/||sub");
    CHECK_STR_EQ(resolve("abslink/new/x"), "/sub|new|x");
    CHECK_STR_EQ(resolve("sub/up"), "/||main.py");
    CHECK_STR_EQ(resolve("sub/upout"), ESC());
    CHECK_STR_EQ(resolve("link"), ESC());
}

TEST(dangling_links_resolve_to_the_link)
{
    setup();
    CHECK_STR_EQ(resolve("dangling"), "/||dangling");
    CHECK_STR_EQ(resolve("dangling-out"), "/||dangling-out");
    CHECK_STR_EQ(resolve("dangling/x"), "/|dangling|x");
}

TEST(errors_are_not_escapes)
{
    setup();
    char buf[32];
    snprintf(buf, sizeof(buf), "ERR %d", ENOTDIR);
    CHECK_STR_EQ(resolve("main.py/child"), buf);
    snprintf(buf, sizeof(buf), "ERR %d", ELOOP);
    CHECK_STR_EQ(resolve("loop1"), buf);
}

TEST(open_dir)
{
    setup();
    int fd = -1;
    CHECK_INT_EQ(confine_open_dir(root_fd, root, "sub", &fd), 0);
    safe_close(fd);
    CHECK_INT_EQ(confine_open_dir(root_fd, root, "", &fd), 0);
    safe_close(fd);
    CHECK_INT_EQ(confine_open_dir(root_fd, root, "abslink", &fd), 0);
    safe_close(fd);
    CHECK_INT_EQ(confine_open_dir(root_fd, root, "../..", &fd), -ERRNO_PATH_ESCAPE);
    CHECK_INT_EQ(confine_open_dir(root_fd, root, "nope", &fd), -ENOENT);
    CHECK_INT_EQ(confine_open_dir(root_fd, root, "dangling", &fd), -ENOENT);
    CHECK_INT_EQ(confine_open_dir(root_fd, root, "main.py", &fd), -ENOTDIR);
    CHECK_INT_EQ(confine_open_dir(root_fd, root, "link", &fd), -ERRNO_PATH_ESCAPE);
}

TEST(mkdir_beneath_never_follows)
{
    setup();
    struct stat before, st;
    CHECK_INT_EQ(stat(outside, &before), 0);
    int fd = -1;
    /* Missing components are created with the mode asked for; the fd is the last one. */
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "made/deep", 0750, getuid(), getgid(), &fd), 0);
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/made/deep", root);
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0750);
    struct stat fst;
    CHECK(fd >= 0 && fstat(fd, &fst) == 0 && fst.st_ino == st.st_ino);
    safe_close(fd);
    snprintf(p, sizeof(p), "%s/made", root);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0750);
    /* An existing directory is opened as it is. */
    fd = -1;
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "sub", 0700, getuid(), getgid(), &fd), 0);
    snprintf(p, sizeof(p), "%s/sub", root);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0755);
    safe_close(fd);
    /* A symlink anywhere on the way is refused, inside the root or not. */
    fd = -1;
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "link", 0755, 0, 0, &fd), -ELOOP);
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "link/x", 0755, 0, 0, &fd), -ELOOP);
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "abslink/x", 0755, 0, 0, &fd), -ELOOP);
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "dangling", 0755, 0, 0, &fd), -ELOOP);
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "dangling/x", 0755, 0, 0, &fd), -ELOOP);
    CHECK_INT_EQ(fd, -1);
    snprintf(p, sizeof(p), "%s/x", outside);
    CHECK(access(p, F_OK) < 0);
    CHECK(stat(outside, &st) == 0 && st.st_mode == before.st_mode && st.st_uid == before.st_uid &&
          st.st_ctim.tv_sec == before.st_ctim.tv_sec &&
          st.st_ctim.tv_nsec == before.st_ctim.tv_nsec);
    /* Not a directory; bad paths. */
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "main.py", 0755, 0, 0, &fd), -ENOTDIR);
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "main.py/x", 0755, 0, 0, &fd), -ENOTDIR);
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "sub/../x", 0755, 0, 0, &fd), -EINVAL);
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "/abs", 0755, 0, 0, &fd), -EINVAL);
    CHECK_INT_EQ(confine_mkdir_beneath(root_fd, "", 0755, 0, 0, &fd), -EINVAL);
    CHECK_INT_EQ(fd, -1);
}

TEST(cleanup_tmp)
{
    setup();
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    CHECK_INT_EQ(system(cmd), 0);
    root_fd = safe_close(root_fd);
}
