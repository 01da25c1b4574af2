/* Home-directory snapshots round-trip exactly: a tree is archived by GNU tar as the sandbox does
 * (`tar -cf -`), passed through agent_backup_write_fd() and agent_backup_read_fd() as the agent
 * does, extracted by `tar -xpf -` and compared entry by entry with the original: type, mode,
 * mtime (whole seconds, as tar stores them), content, symlink target and hard-link groups.
 * A property test over seeded random trees, plus the reported case (`d/f` with a hard link to it
 * that tar meets first). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent-internal.h"
#include "basic/hash.h"
#include "basic/macro.h"
#include "unit.h"

/* ---- trees ---- */

typedef struct entry {
    char path[512];
    struct stat st;
    char target[512]; /* symlinks */
    uint64_t hash;    /* regular files: FNV-1a of the content */
} entry;

typedef struct tree {
    entry *v;
    size_t n, cap;
} tree;

static uint64_t hash_file(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    uint64_t h = FNV1A64_INIT;
    if (fd < 0)
        return 0;
    unsigned char chunk[4096];
    ssize_t k;
    while ((k = read(fd, chunk, sizeof(chunk))) > 0)
        h = fnv1a64_update(h, chunk, (size_t)k);
    close(fd);
    return h;
}

static void walk(tree *t, const char *root, const char *rel)
{
    char full[1024];
    snprintf(full, sizeof(full), "%s/%s", root, rel);
    DIR *d = opendir(full);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (t->n == t->cap) {
            t->cap = t->cap ? t->cap * 2 : 64;
            t->v = realloc(t->v, t->cap * sizeof(*t->v));
        }
        entry *e = &t->v[t->n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->path, sizeof(e->path), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        fstatat(dirfd(d), de->d_name, &e->st, AT_SYMLINK_NOFOLLOW);
        if (S_ISLNK(e->st.st_mode)) {
            ssize_t k = readlinkat(dirfd(d), de->d_name, e->target, sizeof(e->target) - 1);
            e->target[k > 0 ? k : 0] = '\0';
        } else if (S_ISREG(e->st.st_mode)) {
            e->hash = hash_file(dirfd(d), de->d_name);
        } else if (S_ISDIR(e->st.st_mode)) {
            char sub[512];
            snprintf(sub, sizeof(sub), "%s", e->path);
            walk(t, root, sub);
        }
    }
    closedir(d);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->path, ((const entry *)b)->path);
}

/* The first path (in name order) sharing e's inode: names hard-link groups independently of
 * inode numbers. */
static const char *group_of(const tree *t, const entry *e)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].st.st_ino == e->st.st_ino && t->v[i].st.st_dev == e->st.st_dev)
            return t->v[i].path;
    return e->path;
}

static void describe(const tree *t, const entry *e, char *out, size_t n)
{
    mode_t type = e->st.st_mode & S_IFMT;
    if (type == S_IFLNK)
        snprintf(out, n, "%s link -> %s", e->path, e->target);
    else if (type == S_IFDIR)
        snprintf(out, n, "%s dir %04o mtime %lld", e->path, (unsigned)(e->st.st_mode & 07777),
                 (long long)e->st.st_mtime);
    else
        snprintf(out, n, "%s file %04o mtime %lld size %lld hash %016llx group %s", e->path,
                 (unsigned)(e->st.st_mode & 07777), (long long)e->st.st_mtime,
                 (long long)e->st.st_size, (unsigned long long)e->hash, group_of(t, e));
}

static tree scan(const char *root)
{
    tree t = {0};
    t.v = calloc(1, sizeof(entry));
    t.cap = 1;
    t.n = 1;
    strcpy(t.v[0].path, ".");
    lstat(root, &t.v[0].st);
    walk(&t, root, "");
    qsort(t.v, t.n, sizeof(entry), cmp_entry);
    return t;
}

/* Number of differing lines (printed). */
static int compare(const char *a, const char *b)
{
    tree ta = scan(a), tb = scan(b);
    int diffs = 0;
    size_t i = 0, j = 0;
    char da[1400], db[1400];
    while (i < ta.n || j < tb.n) {
        int c = i >= ta.n ? 1 : j >= tb.n ? -1 : strcmp(ta.v[i].path, tb.v[j].path);
        if (c < 0) {
            describe(&ta, &ta.v[i++], da, sizeof(da));
            printf("#   lost: %s\n", da);
            diffs++;
        } else if (c > 0) {
            describe(&tb, &tb.v[j++], db, sizeof(db));
            printf("#   extra: %s\n", db);
            diffs++;
        } else {
            describe(&ta, &ta.v[i++], da, sizeof(da));
            describe(&tb, &tb.v[j++], db, sizeof(db));
            if (strcmp(da, db) != 0) {
                printf("#   before: %s\n#   after:  %s\n", da, db);
                diffs++;
            }
        }
    }
    free(ta.v);
    free(tb.v);
    return diffs;
}

/* ---- the round trip ---- */

/* Runs `sh -c cmd` with fd as its stdin (dir_in) or stdout; returns its pid. */
static pid_t spawn_sh(const char *cmd, int fd, bool fd_is_stdin)
{
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, fd_is_stdin ? 0 : 1);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_ok(pid_t pid)
{
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* src -> tar -> backup at path -> tar -> dst. tar_flags are extra `tar -c` flags. */
static int round_trip(const char *src, const char *dst, const char *path, const char *tar_flags)
{
    char cmd[2048];
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    snprintf(cmd, sizeof(cmd), "tar -cf - %s -C '%s' .", tar_flags, src);
    pid_t pid = spawn_sh(cmd, p[1], false);
    close(p[1]);
    _cleanup_(api_error_clearp) api_error err = API_ERROR_INIT;
    int r = agent_backup_write_fd(path, p[0], &err);
    close(p[0]);
    if (wait_ok(pid) != 0 && r == 0)
        r = -EIO;
    if (r < 0) {
        printf("#   write: %s\n", err.message ? err.message : strerror(-r));
        return r;
    }
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && tar -xpf - -C '%s'", dst, dst);
    pid = spawn_sh(cmd, p[0], true);
    close(p[0]);
    r = agent_backup_read_fd(path, p[1], &err);
    close(p[1]);
    if (wait_ok(pid) != 0 && r == 0)
        r = -EIO;
    if (r < 0)
        printf("#   read: %s\n", err.message ? err.message : strerror(-r));
    return r;
}

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("#   cannot remove %s\n", dir);
}

/* ---- generated trees ---- */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

#define MAX_NODES 48

typedef struct gen {
    char dirs[MAX_NODES][256];
    size_t ndirs;
    char files[MAX_NODES][256];
    size_t nfiles;
} gen;

static void set_mtime(const char *root, const char *rel, bool nofollow)
{
    char full[1024];
    snprintf(full, sizeof(full), "%s/%s", root, rel);
    struct timespec ts[2] = {{.tv_sec = 1000000000 + rnd(700000000)}, {0}};
    ts[1] = ts[0];
    utimensat(AT_FDCWD, full, ts, nofollow ? AT_SYMLINK_NOFOLLOW : 0);
}

/* A random tree under root: nested and empty directories, files with random modes and contents,
 * symlinks inside, outside and dangling, hard links across directories. */
static void generate(const char *root, uint64_t seed)
{
    rng_state = seed * 2654435761u + 1;
    gen *g = calloc(1, sizeof(*g));
    strcpy(g->dirs[g->ndirs++], ".");
    char full[1024];
    size_t nodes = 5 + rnd(MAX_NODES - 5);
    for (size_t i = 0; i < nodes; i++) {
        const char *parent = g->dirs[rnd((uint32_t)g->ndirs)];
        char rel[256];
        snprintf(rel, sizeof(rel), "%s/n%zu%s", parent, i, rnd(4) == 0 ? " sp" : "");
        snprintf(full, sizeof(full), "%s/%s", root, rel);
        uint32_t kind = rnd(10);
        if (kind < 3 && g->ndirs < MAX_NODES) {
            mkdir(full, 0700);
            strcpy(g->dirs[g->ndirs++], rel);
        } else if (kind < 7 || g->nfiles == 0) {
            FILE *f = fopen(full, "we");
            size_t len = rnd(3) == 0 ? 0 : rnd(5000);
            for (size_t k = 0; k < len; k++)
                fputc((int)rnd(256), f);
            fclose(f);
            strcpy(g->files[g->nfiles++], rel);
            chmod(full, 0400 | rnd(01000));
        } else if (kind < 9) {
            static const char *const out[] = {"/etc/passwd", "../../outside", "/nonexistent",
                                              "dangling"};
            const char *target =
                rnd(2) ? out[rnd(4)] : g->files[rnd((uint32_t)g->nfiles)] + 2; /* "./" */
            char t[300];
            /* In-tree targets are relative to the link's directory: go up to the root. */
            size_t depth = 0;
            for (const char *c = rel + 2; *c; c++)
                depth += *c == '/';
            t[0] = '\0';
            for (size_t k = 0;
                 k < depth && target[0] != '/' && target != out[1] && target != out[3]; k++)
                strcat(t, "../");
            strncat(t, target, sizeof(t) - strlen(t) - 1);
            if (symlink(t, full) == 0)
                set_mtime(root, rel, true);
        } else {
            char src[1024];
            snprintf(src, sizeof(src), "%s/%s", root, g->files[rnd((uint32_t)g->nfiles)]);
            if (link(src, full) < 0)
                printf("#   link %s: %s\n", full, strerror(errno));
        }
    }
    for (size_t i = 0; i < g->nfiles; i++)
        set_mtime(root, g->files[i], false);
    for (size_t i = g->ndirs; i-- > 1;) { /* deepest last written: set directory modes/times */
        snprintf(full, sizeof(full), "%s/%s", root, g->dirs[i]);
        chmod(full, 0700 | rnd(0100));
        set_mtime(root, g->dirs[i], false);
    }
    set_mtime(root, ".", false);
    free(g);
}

TEST(backup_round_trip_reported_hard_link)
{
    char base[] = "/tmp/agent-backup-XXXXXX";
    CHECK(mkdtemp(base) != NULL);
    char src[300], dst[300], path[300], p[600];
    snprintf(src, sizeof(src), "%s/src", base);
    snprintf(dst, sizeof(dst), "%s/dst", base);
    snprintf(path, sizeof(path), "%s/backup.tar.gz", base);
    mkdir(src, 0755);
    snprintf(p, sizeof(p), "%s/d", src);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/d/f", src);
    FILE *f = fopen(p, "we");
    fputs("data\n", f);
    fclose(f);
    char a[600];
    snprintf(a, sizeof(a), "%s/a", src);
    CHECK_INT_EQ(link(p, a), 0);
    snprintf(p, sizeof(p), "%s/s", src);
    CHECK_INT_EQ(symlink("d/f", p), 0);
    snprintf(p, sizeof(p), "%s/empty", src);
    mkdir(p, 0750);
    /* A name that is not UTF-8, hard-linked too. */
    snprintf(p, sizeof(p), "%s/d/caf\xe9", src);
    f = fopen(p, "we");
    fputs("latin1\n", f);
    fclose(f);
    snprintf(a, sizeof(a), "%s/\xff-link", src);
    CHECK_INT_EQ(link(p, a), 0);
    /* --sort=name: tar meets ./a first, so ./d/f is the hard-link entry that used to be dropped. */
    CHECK_INT_EQ(round_trip(src, dst, path, "--sort=name"), 0);
    CHECK_INT_EQ(compare(src, dst), 0);
    snprintf(p, sizeof(p), "%s/d/f", dst);
    CHECK(access(p, F_OK) == 0);
    rm_rf(base);
}

TEST(backup_round_trip_property)
{
    const char *env = getenv("AGENT_BACKUP_SEEDS");
    unsigned seeds = env ? (unsigned)atoi(env) : 40;
    for (unsigned seed = 1; seed <= seeds; seed++) {
        char base[] = "/tmp/agent-backup-XXXXXX";
        CHECK(mkdtemp(base) != NULL);
        char src[300], dst[300], path[300];
        snprintf(src, sizeof(src), "%s/src", base);
        snprintf(dst, sizeof(dst), "%s/dst", base);
        snprintf(path, sizeof(path), "%s/backup.tar.gz", base);
        mkdir(src, 0755);
        generate(src, seed);
        /* Both orders tar may meet a hard link's names in. */
        const char *flags = seed % 2 ? "--sort=name" : "";
        int r = round_trip(src, dst, path, flags);
        int d = r == 0 ? compare(src, dst) : -1;
        if (r != 0 || d != 0)
            printf("#   seed %u (%s): round trip %d, %d differences\n", seed, flags, r, d);
        CHECK_INT_EQ(r, 0);
        CHECK_INT_EQ(d, 0);
        rm_rf(base);
    }
}
