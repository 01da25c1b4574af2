/* Snapshot trees and their store: a property test over generated trees (every kind of entry,
 * ownership, modes, times, hard links, sparse files, xattrs) that a capture restored elsewhere
 * is identical, deduplication, reuse of unchanged files, garbage collection, corrupt objects
 * and hostile manifests. Needs root (chown to arbitrary ids); skipped otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <dirent.h>
#include <unistd.h>

#include "basic/buf.h"
#include "basic/hash.h"
#include "basic/macro.h"
#include "basic/time-util.h"
#include "local/fs/local-fs.h"
#include "basic/fs-util.h"
#include "local/snapshot/local-snapshot-manifest.h"
#include "local/snapshot/local-snapshot-overlay.h"
#include "local/snapshot/local-snapshot-store.h"
#include "local/snapshot/local-snapshot-tree.h"
#include "local/snapshot/local-snapshot.h"
#include "unit.h"

#define BASE_A 200000u
#define BASE_B 400000u
#define SLOT 65536u

static unsigned long long rng = 88172645463325252ull;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static char *tmpdir(void)
{
    char *p = strdup("/var/tmp/test-snapshot-XXXXXX");
    if (!p || !mkdtemp(p))
        abort();
    return p;
}

static bool xattrs_supported;

static void write_at(int fd, off_t off, size_t n, unsigned seed)
{
    char *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (char)((seed * 31 + i * 7) ^ (i >> 9));
    if (pwrite(fd, b, n, off) != (ssize_t)n)
        abort();
    free(b);
}

static void meta(const char *p, bool link)
{
    uid_t u = BASE_A + rnd(3) * 1000;
    gid_t g = BASE_A + rnd(3) * 1000 + 1;
    if (lchown(p, u, g) < 0)
        abort();
    if (!link) {
        static const mode_t modes[] = {0644, 0600, 0755, 04755, 02750, 01777, 0400, 0};
        if (chmod(p, modes[rnd(ELEMENTSOF(modes))]) < 0)
            abort();
        struct stat st;
        /* user.* xattrs exist on regular files and directories only. */
        if (xattrs_supported && lstat(p, &st) == 0 &&
            (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) && rnd(3) == 0) {
            char v[16];
            int n = snprintf(v, sizeof(v), "v%u\001\377", rnd(1000));
            if (lsetxattr(p, "user.asb.test", v, (size_t)n, 0) < 0)
                abort();
        }
    }
    struct timespec ts[2] = {{.tv_sec = 1000000 + rnd(100000), .tv_nsec = rnd(1000000000)},
                             {.tv_sec = 1500000000 + rnd(100000), .tv_nsec = rnd(1000000000)}};
    if (utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW) < 0)
        abort();
}

/* A random tree under dir, `depth` levels deep. Files are listed in files[] for hard links. */
static void gen_tree(const char *dir, int depth, char files[][512], size_t *nfiles)
{
    unsigned n = 3 + rnd(6);
    for (unsigned i = 0; i < n; i++) {
        char p[512];
        snprintf(p, sizeof(p), "%s/e%u-%u", dir, depth, i);
        unsigned kind = rnd(depth > 0 ? 8 : 7);
        if (kind <= 2) { /* plain file, sometimes large or empty */
            int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
            size_t len = rnd(4) == 0 ? 0 : rnd(5) == 0 ? 300000 + rnd(100000) : rnd(5000);
            if (len)
                write_at(fd, 0, len, rnd(1000));
            close(fd);
            meta(p, false);
            snprintf(files[(*nfiles)++], 512, "%s", p);
        } else if (kind == 3) { /* sparse: data, hole, data, trailing hole */
            int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
            write_at(fd, 0, 5000, 1);
            write_at(fd, 1 << 20, 4096, 2);
            if (ftruncate(fd, (3 << 20) + rnd(4096)) < 0)
                abort();
            close(fd);
            meta(p, false);
        } else if (kind == 4) {
            if (symlink(rnd(2) ? "../somewhere/else" : "/etc/passwd", p) < 0)
                abort();
            meta(p, true);
        } else if (kind == 5 && *nfiles > 0) {
            if (link(files[rnd((unsigned)*nfiles)], p) < 0)
                abort();
        } else if (kind == 6) {
            if (mkfifo(p, 0640) < 0)
                abort();
            meta(p, false);
        } else if (depth < 3) {
            if (mkdir(p, 0755) < 0)
                abort();
            gen_tree(p, depth + 1, files, nfiles);
            meta(p, false);
        }
    }
}

/* path -> description of everything a restore must keep, ids relative to base; hard links are
 * described by the first path of their inode. */
static void describe(const char *root, const char *rel, uint32_t base, json_t *out, json_t *inodes)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s%s%s", root, *rel ? "/" : "", rel);
    struct stat st;
    if (lstat(p, &st) < 0)
        abort();
    _cleanup_buf_ buf d = BUF_INIT;
    char ik[64];
    snprintf(ik, sizeof(ik), "%llu", (unsigned long long)st.st_ino);
    const char *first = json_string_value(json_object_get(inodes, ik));
    if (first && !S_ISDIR(st.st_mode)) {
        buf_appendf(&d, "hardlink of %s", first);
        json_object_set_new(out, rel, json_string(d.data));
        return;
    }
    json_object_set_new(inodes, ik, json_string(rel));
    buf_appendf(&d, "type %o mode %o uid %u gid %u mtime %lld.%09ld", st.st_mode & S_IFMT,
                S_ISLNK(st.st_mode) ? 0 : st.st_mode & 07777, st.st_uid - base, st.st_gid - base,
                (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    /* Listing a directory or reading a symlink sets its atime (no O_NOATIME for those): only
     * the atime of other entries survives the capture itself. */
    if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
        buf_appendf(&d, " atime %lld.%09ld", (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec);
    char xv[64];
    ssize_t xn = lgetxattr(p, "user.asb.test", xv, sizeof(xv));
    if (xn > 0)
        buf_appendf(&d, " xattr %zd:%016llx", xn,
                    (unsigned long long)fnv1a64_update(FNV1A64_INIT, xv, (size_t)xn));
    if (S_ISLNK(st.st_mode)) {
        char t[512];
        ssize_t n = readlink(p, t, sizeof(t) - 1);
        t[n < 0 ? 0 : n] = 0;
        buf_appendf(&d, " -> %s", t);
    } else if (S_ISREG(st.st_mode)) {
        int fd = open(p, O_RDONLY | O_NOATIME);
        uint64_t h = FNV1A64_INIT;
        char b[65536];
        ssize_t n;
        while ((n = read(fd, b, sizeof(b))) > 0)
            h = fnv1a64_update(h, b, (size_t)n);
        buf_appendf(&d, " size %lld content %016llx data", (long long)st.st_size,
                    (unsigned long long)h);
        for (off_t pos = 0, dd; (dd = lseek(fd, pos, SEEK_DATA)) >= 0;) {
            off_t hh = lseek(fd, dd, SEEK_HOLE);
            buf_appendf(&d, " [%lld,%lld)", (long long)dd, (long long)hh);
            pos = hh;
        }
        close(fd);
    }
    json_object_set_new(out, rel, json_string(d.data));
    if (S_ISDIR(st.st_mode)) {
        struct dirent **names;
        int n = scandir(p, &names, NULL, alphasort);
        for (int i = 0; i < n; i++) {
            if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..")) {
                char child[1024];
                snprintf(child, sizeof(child), "%s%s%s", rel, *rel ? "/" : "", names[i]->d_name);
                describe(root, child, base, out, inodes);
            }
            free(names[i]);
        }
        free(names);
    }
}

static json_t *description(const char *root, uint32_t base)
{
    json_t *out = json_object(), *inodes = json_object();
    describe(root, "", base, out, inodes);
    json_decref(inodes);
    return out;
}

static bool is_root(void)
{
    if (geteuid() == 0)
        return true;
    printf("# skipped: needs root\n");
    return false;
}

static void probe_xattrs(const char *dir)
{
    xattrs_supported = lsetxattr(dir, "user.asb.probe", "1", 1, 0) == 0;
    if (xattrs_supported)
        lremovexattr(dir, "user.asb.probe");
}

TEST(property_generated_trees_restore_exactly)
{
    if (!is_root())
        return;
    /* What the generated trees held, so that the property covers every feature. */
    static const char *const features[] = {"hardlink of", "xattr",     "-> ", "type 10000",
                                           "mode 4755",   "mode 1777", ") ["};
    unsigned seen[ELEMENTSOF(features)] = {0};
    for (unsigned round = 0; round < 6; round++) {
        _cleanup_free_ char *top = tmpdir();
        char src[600], dst[600], store_dir[600];
        snprintf(src, sizeof(src), "%s/src", top);
        snprintf(dst, sizeof(dst), "%s/dst", top);
        snprintf(store_dir, sizeof(store_dir), "%s/store", top);
        mkdir(src, 0755);
        mkdir(dst, 0700);
        probe_xattrs(src);
        static char files[4096][512];
        size_t nfiles = 0;
        gen_tree(src, 0, files, &nfiles);
        meta(src, false);
        snap_store *s = NULL;
        CHECK_INT_EQ(snap_store_open(store_dir, &s), 0);
        snap_root roots[] = {{SNAP_ROOT_WORKSPACE, src}};
        snap_capture_options o = {.id_base = BASE_A, .id_count = SLOT};
        json_t *m = NULL;
        char *err = NULL;
        snap_stats st = {0};
        CHECK_INT_EQ(snap_capture(s, roots, 1, &o, &m, &st, &err), 0);
        CHECK_INT_EQ(snap_manifest_check(m, &err), 0);
        if (err)
            printf("# %s\n", err);
        json_t *want = description(src, BASE_A);
        const char *wk;
        json_t *wv;
        json_object_foreach (want, wk, wv)
            for (size_t f = 0; f < ELEMENTSOF(features); f++)
                seen[f] += strstr(json_string_value(wv), features[f]) != NULL;
        CHECK_INT_EQ(snap_restore(s, m, SNAP_ROOT_WORKSPACE, dst, BASE_B, &err), 0);
        json_t *got = description(dst, BASE_B);
        CHECK(json_equal(want, got));
        if (!json_equal(want, got)) {
            const char *k;
            json_t *v;
            json_object_foreach (want, k, v)
                if (!json_equal(v, json_object_get(got, k)))
                    printf("# %s:\n#  want %s\n#  got  %s\n", k, json_string_value(v),
                           json_string_value(json_object_get(got, k)));
        }
        CHECK(st.entries == (uint64_t)json_object_size(want));
        json_decref(want);
        json_decref(got);
        json_decref(m);
        free(err);
        snap_store_free(s);
        fs_rm_rf(top);
    }
    for (size_t f = 0; f < ELEMENTSOF(features); f++) {
        if (f == 1 && !xattrs_supported)
            continue;
        CHECK(seen[f] > 0);
    }
}

static void write_file(const char *dir, const char *name, size_t len, unsigned seed)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write_at(fd, 0, len, seed);
    close(fd);
}

static bool mounted(const char *path)
{
    struct statx a, b;
    char parent[700];
    snprintf(parent, sizeof(parent), "%s/..", path);
    return statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &a) == 0 &&
           statx(AT_FDCWD, parent, 0, STATX_MNT_ID, &b) == 0 && a.stx_mnt_id != b.stx_mnt_id;
}

/* A directory of its own filesystem for a test: a tmpfs mounted on a new temporary directory
 * (idmapped mounts work on tmpfs since Linux 6.3) or, with `overlay`, an overlayfs over layers
 * on such a tmpfs (overlayfs refuses idmapped mounts: the fork's fallback). Unmounted by
 * test_fs_free. */
typedef struct {
    char *top, *mnt;
} test_fs;

static void test_fs_free(test_fs *t)
{
    if (t->mnt && t->mnt != t->top) {
        CHECK_INT_EQ(umount2(t->mnt, MNT_DETACH), 0);
        free(t->mnt);
    }
    CHECK_INT_EQ(umount2(t->top, MNT_DETACH), 0);
    CHECK_INT_EQ(rmdir(t->top), 0);
    free(t->top);
}

static test_fs test_fs_make(bool overlay)
{
    test_fs t = {.top = tmpdir()};
    CHECK_INT_EQ(mount("tmpfs", t.top, "tmpfs", 0, "size=512m,mode=0755"), 0);
    t.mnt = t.top;
    if (overlay) {
        char opts[2048];
        t.mnt = strdup_printf("%s/merged", t.top);
        for (const char *const *d = (const char *const[]){"lower", "upper", "work", "merged", NULL};
             *d; d++) {
            _cleanup_free_ char *p = strdup_printf("%s/%s", t.top, *d);
            CHECK_INT_EQ(mkdir(p, 0755), 0);
        }
        snprintf(opts, sizeof(opts), "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work", t.top,
                 t.top, t.top);
        CHECK_INT_EQ(mount("overlay", t.mnt, "overlay", 0, opts), 0);
    }
    return t;
}

/* The directories of one fork round under top: a source tree captured into the store of
 * state, and the fork's workspace and volumes. */
typedef struct {
    char src[600], state[600], store_dir[600], ws[600], vols[600], dst2[600], tree[700],
        fork_dir[620], uid[32];
} fork_paths;

static void fork_paths_make(fork_paths *p, const char *top, unsigned round)
{
    snprintf(p->src, sizeof(p->src), "%s/src", top);
    snprintf(p->state, sizeof(p->state), "%s/state", top);
    snprintf(p->store_dir, sizeof(p->store_dir), "%s/state/snapshots", top);
    snprintf(p->ws, sizeof(p->ws), "%s/fork/workspace", top);
    snprintf(p->vols, sizeof(p->vols), "%s/fork/volumes", top);
    snprintf(p->dst2, sizeof(p->dst2), "%s/dst2", top);
    snprintf(p->fork_dir, sizeof(p->fork_dir), "%s/fork", top);
    snprintf(p->uid, sizeof(p->uid), "snap%u", round);
    snprintf(p->tree, sizeof(p->tree), "%s/snapshots/trees/%s", p->state, p->uid);
    CHECK_INT_EQ(mkdir(p->src, 0755), 0);
    CHECK_INT_EQ(mkdir(p->state, 0755), 0);
    CHECK_INT_EQ(mkdir(p->dst2, 0700), 0);
    CHECK_INT_EQ(mkdir_p(p->ws, 0700), 0);
    CHECK_INT_EQ(mkdir_p(p->vols, 0755), 0);
}

static bool dir_is_empty(const char *dir)
{
    _cleanup_closedir_ DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            return false;
    return d != NULL;
}

/* The overlay-only part of a round: seeding again mounts nothing twice, what the fork writes
 * never reaches the tree, teardown unmounts, and the tree outlives its manifest while a sandbox
 * names it. */
static void check_overlay_fork(const fork_paths *p, json_t *want, char files[][512], size_t nfiles)
{
    char *err = NULL;
    CHECK(mounted(p->ws));
    /* Seeding again (a restart) changes nothing and mounts nothing twice. */
    CHECK_INT_EQ(local_snapshot_seed(p->state, p->uid, p->ws, p->vols, BASE_B, true, &err),
                 LOCAL_SNAPSHOT_SEED_OVERLAY);
    if (err)
        printf("# %s\n", err);
    CHECK(!err);
    free(TAKE_PTR(err));
    json_t *tree_before = description(p->tree, 0);
    for (size_t i = 0; i < nfiles && i < 8; i++) {
        char path[1200];
        snprintf(path, sizeof(path), "%s/%.500s", p->ws, files[i]);
        int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            CHECK(write(fd, "fork", 4) == 4);
            close(fd);
        }
    }
    write_file(p->ws, "new-in-fork", 1000, 7);
    json_t *tree_after = description(p->tree, 0), *changed = description(p->ws, BASE_B);
    CHECK(json_equal(tree_before, tree_after));
    CHECK(json_object_get(changed, "new-in-fork") && !json_equal(want, changed));
    json_decref(changed);
    json_decref(tree_before);
    json_decref(tree_after);

    /* The teardown's own release looks at the directory's entries only: the workspace is one
     * of fork/'s, not of top's. */
    char top[600];
    snprintf(top, sizeof(top), "%.*s", (int)(strrchr(p->fork_dir, '/') - p->fork_dir), p->fork_dir);
    CHECK_INT_EQ(local_snapshot_entry_overlays_release(top), 0);
    CHECK(mounted(p->ws));
    CHECK_INT_EQ(local_snapshot_overlays_release(top), 0);
    CHECK(!mounted(p->ws));
    CHECK_INT_EQ(local_snapshot_seed(p->state, p->uid, p->ws, p->vols, BASE_B, true, &err),
                 LOCAL_SNAPSHOT_SEED_OVERLAY);
    if (err)
        printf("# %s\n", err);
    free(TAKE_PTR(err));
    CHECK(mounted(p->ws));
    CHECK_INT_EQ(local_snapshot_entry_overlays_release(p->fork_dir), 0);
    CHECK(!mounted(p->ws));

    char seeded[700], manifest[700], line[64];
    snprintf(seeded, sizeof(seeded), "%s/sandboxes/x/seeded", p->state);
    CHECK_INT_EQ(mkdir_p(seeded, 0755), 0);
    rmdir(seeded);
    CHECK_INT_EQ(fs_write_file(seeded, "snapX\nhost\noverlay\n", 0644), 0);
    snprintf(manifest, sizeof(manifest), "%s/manifests/%s.json", p->store_dir, p->uid);
    local_snapshot_trees_gc(p->state);
    CHECK(access(p->tree, F_OK) == 0); /* its manifest is still there */
    CHECK_INT_EQ(unlink(manifest), 0);
    snprintf(line, sizeof(line), "%s\nhost\noverlay\n", p->uid);
    CHECK_INT_EQ(fs_write_file(seeded, line, 0644), 0);
    local_snapshot_trees_gc(p->state);
    CHECK(access(p->tree, F_OK) == 0); /* a fork still names it */
    CHECK_INT_EQ(unlink(seeded), 0);
    local_snapshot_trees_gc(p->state);
    CHECK(access(p->tree, F_OK) < 0);
}

/* One fork of a generated tree on the filesystem of top, by the way `expect` says: either way
 * it shows exactly the captured tree, and a snapshot of the fork restores exactly again. A copy
 * says why there is no overlay, mounts nothing and unpacks no tree. */
static void fork_round(const char *top, unsigned round, int expect)
{
    fork_paths p;
    fork_paths_make(&p, top, round);
    probe_xattrs(p.src);
    static char files[4096][512];
    size_t nfiles = 0;
    gen_tree(p.src, 0, files, &nfiles);
    meta(p.src, false);
    snap_store *s = NULL;
    CHECK_INT_EQ(snap_store_open(p.store_dir, &s), 0);
    snap_root roots[] = {{SNAP_ROOT_WORKSPACE, p.src}};
    snap_capture_options o = {.id_base = BASE_A, .id_count = SLOT};
    json_t *m = NULL, *m2 = NULL;
    char *err = NULL;
    CHECK_INT_EQ(snap_capture(s, roots, 1, &o, &m, NULL, &err), 0);
    CHECK_INT_EQ(snap_store_save_manifest(s, p.uid, m), 0);
    json_t *want = description(p.src, BASE_A);

    CHECK_INT_EQ(local_snapshot_seed(p.state, p.uid, p.ws, p.vols, BASE_B, false, &err), expect);
    if (expect == LOCAL_SNAPSHOT_SEED_COPY) {
        CHECK(err && strstr(err, "idmapped"));
        CHECK(!mounted(p.ws));
        CHECK(access(p.tree, F_OK) < 0);
    } else
        CHECK(!err);
    free(TAKE_PTR(err));
    json_t *got = description(p.ws, BASE_B);
    CHECK(json_equal(want, got));

    /* A snapshot of the fork reads what the fork shows: a fork of the fork is exact too. */
    snap_capture_options o2 = {.id_base = BASE_B, .id_count = SLOT};
    CHECK_INT_EQ(snap_capture(s, (snap_root[]){{SNAP_ROOT_WORKSPACE, p.ws}}, 1, &o2, &m2, NULL,
                              &err),
                 0);
    CHECK_INT_EQ(snap_restore(s, m2, SNAP_ROOT_WORKSPACE, p.dst2, BASE_A, &err), 0);
    CHECK(!err);
    json_t *got2 = description(p.dst2, BASE_A);
    CHECK(json_equal(want, got2));

    if (expect == LOCAL_SNAPSHOT_SEED_OVERLAY)
        check_overlay_fork(&p, want, files, nfiles);
    CHECK_INT_EQ(local_snapshot_entry_overlays_release(p.fork_dir), 0);
    CHECK(!mounted(p.ws));
    json_decref(want);
    json_decref(got);
    json_decref(got2);
    json_decref(m);
    json_decref(m2);
    snap_store_free(s);
}

/* Forks are overlays over the snapshot's unpacked tree, idmapped to the fork's ids, wherever the
 * filesystem allows idmapped mounts (a tmpfs does on Linux 6.3+): nothing copied, exact, and
 * what the fork writes stays in the fork. Elsewhere the same contract holds by copy. */
TEST(property_forks_over_overlays_are_exact)
{
    if (!is_root())
        return;
    for (unsigned round = 0; round < 3; round++) {
        test_fs t = test_fs_make(false);
        int probe = local_snapshot_overlay_probe(t.mnt, BASE_B);
        if (probe < 0)
            printf("# tmpfs refuses idmapped mounts here (%s): forks are copies\n",
                   strerror(-probe));
        fork_round(t.mnt, round, probe == 0 ? LOCAL_SNAPSHOT_SEED_OVERLAY
                                            : LOCAL_SNAPSHOT_SEED_COPY);
        test_fs_free(&t);
    }
}

/* A state directory on overlayfs (a container's root, the fresh-machine check's /var/tmp): the
 * kernel refuses to idmap it, and a fork falls back to an exact copy, checked before anything is
 * unpacked. */
TEST(forks_fall_back_to_copies_where_idmapped_mounts_are_refused)
{
    if (!is_root())
        return;
    test_fs t = test_fs_make(true);
    int probe = local_snapshot_overlay_probe(t.mnt, BASE_B);
    if (probe == 0)
        printf("# this kernel idmaps overlayfs: the fallback is not reached here\n");
    else
        fork_round(t.mnt, 0, LOCAL_SNAPSHOT_SEED_COPY);
    test_fs_free(&t);
}

/* A first seed that fails (no manifest; a manifest whose objects are gone) says why, mounts
 * nothing and leaves the fork's directories empty, on both paths; ASan checks that no path leaks. */
TEST(failed_seeds_leave_nothing)
{
    if (!is_root())
        return;
    for (int overlay = 0; overlay < 2; overlay++) {
        test_fs t = test_fs_make(overlay);
        fork_paths p;
        fork_paths_make(&p, t.mnt, 0);
        write_file(p.src, "a", 70000, 1);
        write_file(p.src, "b", 100, 2);
        char *err = NULL;
        CHECK(local_snapshot_seed(p.state, "missing", p.ws, p.vols, BASE_B, false, &err) < 0);
        CHECK(err != NULL);
        free(TAKE_PTR(err));
        CHECK(dir_is_empty(p.ws) && !mounted(p.ws));

        snap_store *s = NULL;
        json_t *m = NULL;
        CHECK_INT_EQ(snap_store_open(p.store_dir, &s), 0);
        snap_capture_options o = {.id_base = 0, .id_count = SLOT};
        CHECK_INT_EQ(snap_capture(s, (snap_root[]){{SNAP_ROOT_WORKSPACE, p.src}}, 1, &o, &m,
                                  NULL, &err),
                     0);
        CHECK_INT_EQ(snap_store_save_manifest(s, p.uid, m), 0);
        char objects[700];
        snprintf(objects, sizeof(objects), "%s/objects", p.store_dir);
        CHECK_INT_EQ(fs_rm_rf(objects), 0);
        CHECK(local_snapshot_seed(p.state, p.uid, p.ws, p.vols, BASE_B, false, &err) < 0);
        CHECK(err != NULL);
        free(TAKE_PTR(err));
        CHECK(dir_is_empty(p.ws) && !mounted(p.ws));
        CHECK(access(p.tree, F_OK) < 0);
        json_decref(m);
        snap_store_free(s);
        test_fs_free(&t);
    }
}

static size_t count_objects(const char *store_dir)
{
    size_t n = 0;
    char p[700];
    for (unsigned i = 0; i < 256; i++) {
        snprintf(p, sizeof(p), "%s/objects/%02x", store_dir, i);
        DIR *d = opendir(p);
        struct dirent *e;
        while (d && (e = readdir(d)))
            n += e->d_name[0] != '.';
        if (d)
            closedir(d);
    }
    return n;
}

static int keep_only(const char *uid, void *payload)
{
    return strcmp(uid, payload) == 0;
}

TEST(dedup_hint_reuse_and_gc)
{
    _cleanup_free_ char *top = tmpdir();
    char src[600], store_dir[600];
    snprintf(src, sizeof(src), "%s/src", top);
    snprintf(store_dir, sizeof(store_dir), "%s/store", top);
    mkdir(src, 0755);
    for (unsigned i = 0; i < 20; i++) {
        char n[32];
        snprintf(n, sizeof(n), "f%u", i);
        write_file(src, n, 100000, i);
    }
    write_file(src, "same1", 50000, 99);
    write_file(src, "same2", 50000, 99); /* same content: one object */
    snap_store *s = NULL;
    CHECK_INT_EQ(snap_store_open(store_dir, &s), 0);
    snap_root roots[] = {{SNAP_ROOT_WORKSPACE, src}};
    snap_capture_options o = {0};
    json_t *m1 = NULL, *m2 = NULL, *m3 = NULL;
    snap_stats a = {0}, b = {0}, c = {0};
    CHECK_INT_EQ(snap_capture(s, roots, 1, &o, &m1, &a, NULL), 0);
    CHECK_INT_EQ(count_objects(store_dir), 21);
    CHECK(a.stored > 0 && a.read == 20 * 100000 + 2 * 50000);
    CHECK_INT_EQ(snap_store_save_manifest(s, "one", m1), 0);
    /* Unchanged tree, no hint: everything read again, nothing new stored. */
    CHECK_INT_EQ(snap_capture(s, roots, 1, &o, &m2, &b, NULL), 0);
    CHECK_INT_EQ(b.stored, 0);
    CHECK_INT_EQ(b.read, a.read);
    /* One file changed, with the first as hint: only it is read and stored. */
    write_file(src, "f3", 100000, 1234);
    o.hint = m1;
    CHECK_INT_EQ(snap_capture(s, roots, 1, &o, &m3, &c, NULL), 0);
    CHECK_INT_EQ(c.read, 100000);
    CHECK(c.stored > 0 && c.stored < a.stored / 10);
    CHECK_INT_EQ(count_objects(store_dir), 22);
    CHECK_INT_EQ(snap_store_save_manifest(s, "three", m3), 0);
    /* gc with both manifests: nothing goes; dropping "one": only f3's old content goes. */
    size_t removed = 99;
    CHECK_INT_EQ(snap_store_gc(s, NULL, NULL, &removed), 0);
    CHECK_INT_EQ(removed, 0);
    CHECK_INT_EQ(snap_store_gc(s, keep_only, "three", &removed), 0);
    CHECK_INT_EQ(removed, 1);
    CHECK_INT_EQ(count_objects(store_dir), 21);
    json_t *gone = NULL;
    CHECK_INT_EQ(snap_store_load_manifest(s, "one", &gone), -ENOENT);
    /* What remains restores. */
    char dst[600];
    snprintf(dst, sizeof(dst), "%s/dst", top);
    mkdir(dst, 0755);
    char *err = NULL;
    CHECK_INT_EQ(snap_restore(s, m3, SNAP_ROOT_WORKSPACE, dst, 0, &err), 0);
    json_t *want = description(src, 0), *got = description(dst, 0);
    CHECK(json_equal(want, got));
    json_decref(want);
    json_decref(got);
    json_decref(m1);
    json_decref(m2);
    json_decref(m3);
    free(err);
    snap_store_free(s);
    fs_rm_rf(top);
}

/* The entry at index i of the first root's entries. */
static const json_t *entry_at(const json_t *m, size_t i)
{
    return json_array_get(json_object_get(json_array_get(json_object_get(m, "roots"), 0), "entries"),
                          i);
}

/* A file under a write lease: an open for reading waits for the lease break (45 s by default)
 * unless it does not block. The live pass skips it ("unread"), the frozen pass fails at once, and
 * neither waits; released, it is read. */
TEST(leased_file_never_blocks_a_capture)
{
    _cleanup_free_ char *top = tmpdir();
    char src[600], store_dir[600], f[700];
    snprintf(src, sizeof(src), "%s/src", top);
    snprintf(store_dir, sizeof(store_dir), "%s/store", top);
    snprintf(f, sizeof(f), "%s/leased", src);
    mkdir(src, 0755);
    write_file(src, "leased", 10000, 3);
    /* A lease broken within the test's few milliseconds would not be held by the second pass. */
    _cleanup_fclose_ FILE *bt = fopen("/proc/sys/fs/lease-break-time", "re");
    int break_s = 0;
    if (!bt || fscanf(bt, "%d", &break_s) != 1 || break_s < 5) {
        printf("# skipped: lease-break-time unknown or under 5 s\n");
        fs_rm_rf(top);
        return;
    }
    void (*old)(int) = signal(SIGIO, SIG_IGN); /* the break notice is sent to the holder: us */
    _cleanup_close_ int fd = open(f, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fcntl(fd, F_SETLEASE, F_WRLCK) < 0) {
        printf("# skipped: no leases here: %s\n", strerror(errno));
        signal(SIGIO, old);
        fs_rm_rf(top);
        return;
    }
    snap_store *s = NULL;
    CHECK_INT_EQ(snap_store_open(store_dir, &s), 0);
    snap_root roots[] = {{SNAP_ROOT_WORKSPACE, src}};
    snap_capture_options o = {.tolerant = true};
    json_t *m = NULL;
    char *err = NULL;
    usec_t t0 = now_usec(CLOCK_MONOTONIC);
    CHECK_INT_EQ(snap_capture(s, roots, 1, &o, &m, NULL, &err), 0);
    CHECK(json_is_true(json_object_get(entry_at(m, 1), "unread")));
    json_decref(m);
    m = NULL;
    o.tolerant = false;
    CHECK_INT_EQ(snap_capture(s, roots, 1, &o, &m, NULL, &err), -EWOULDBLOCK);
    CHECK(err && strstr(err, "cannot open leased"));
    CHECK(now_usec(CLOCK_MONOTONIC) - t0 < 5 * USEC_PER_SEC);
    free(err);
    err = NULL;
    CHECK_INT_EQ(fcntl(fd, F_SETLEASE, F_UNLCK), 0);
    CHECK_INT_EQ(snap_capture(s, roots, 1, &o, &m, NULL, &err), 0);
    CHECK(json_is_string(json_object_get(entry_at(m, 1), "object")));
    json_decref(m);
    free(err);
    snap_store_free(s);
    signal(SIGIO, old);
    fs_rm_rf(top);
}

TEST(corrupt_object_is_refused)
{
    _cleanup_free_ char *top = tmpdir();
    char src[600], dst[600], store_dir[600], obj[800];
    snprintf(src, sizeof(src), "%s/src", top);
    snprintf(dst, sizeof(dst), "%s/dst", top);
    snprintf(store_dir, sizeof(store_dir), "%s/store", top);
    mkdir(src, 0755);
    mkdir(dst, 0755);
    write_file(src, "f", 10000, 7);
    snap_store *s = NULL;
    CHECK_INT_EQ(snap_store_open(store_dir, &s), 0);
    snap_root roots[] = {{SNAP_ROOT_WORKSPACE, src}};
    snap_capture_options o = {0};
    json_t *m = NULL;
    CHECK_INT_EQ(snap_capture(s, roots, 1, &o, &m, NULL, NULL), 0);
    const char *h = json_string_value(json_object_get(
        json_array_get(json_object_get(json_array_get(json_object_get(m, "roots"), 0), "entries"),
                       1),
        "object"));
    CHECK(h != NULL);
    snprintf(obj, sizeof(obj), "%s/objects/%.2s/%s", store_dir, h, h);
    CHECK_INT_EQ(truncate(obj, 5), 0);
    char *err = NULL;
    CHECK_INT_EQ(snap_restore(s, m, SNAP_ROOT_WORKSPACE, dst, 0, &err), -EBADMSG);
    CHECK(err && strstr(err, "f"));
    free(err);
    json_decref(m);
    snap_store_free(s);
    fs_rm_rf(top);
}

TEST(hostile_manifests_are_refused)
{
    static const char *const bad[] = {
        "{\"version\":2,\"roots\":[]}",
        "{\"version\":1,\"roots\":[{\"name\":\"../x\",\"entries\":[]}]}",
        "{\"version\":1,\"roots\":[{\"name\":\"workspace\",\"entries\":[{\"path\":\"\",\"type\":"
        "\"dir\",\"mode\":493,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"atime\":[0,0]},{\"path\":\"../"
        "x\",\"type\":\"fifo\",\"mode\":0,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"atime\":[0,0]}]}]}",
        "{\"version\":1,\"roots\":[{\"name\":\"workspace\",\"entries\":[{\"path\":\"\",\"type\":"
        "\"dir\",\"mode\":493,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"atime\":[0,0]},{\"path\":\"f\","
        "\"type\":\"file\",\"mode\":0,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"atime\":[0,0],\"size\":"
        "10,\"extents\":[[0,8],[4,2]],\"object\":\""
        "0000000000000000000000000000000000000000000"
        "000000000000000000000\"}]}]}",
        "{\"version\":1,\"roots\":[{\"name\":\"workspace\",\"entries\":[{\"path\":\"\",\"type\":"
        "\"dir\",\"mode\":493,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"atime\":[0,0]},{\"path\":\"h\","
        "\"type\":\"hardlink\",\"link\":\"/etc/passwd\"}]}]}",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        json_t *m = json_loads(bad[i], 0, NULL);
        char *err = NULL;
        CHECK(m != NULL);
        CHECK_INT_EQ(snap_manifest_check(m, &err), -EBADMSG);
        CHECK(err != NULL);
        free(err);
        json_decref(m);
    }
    if (!is_root())
        return;
    /* Checked but hostile in effect: a symlink out, then a file through it. The walk refuses. */
    _cleanup_free_ char *top = tmpdir();
    char dst[600], outside[600], store_dir[600], json[2048];
    snprintf(dst, sizeof(dst), "%s/dst", top);
    snprintf(outside, sizeof(outside), "%s/outside", top);
    snprintf(store_dir, sizeof(store_dir), "%s/store", top);
    mkdir(dst, 0755);
    mkdir(outside, 0755);
    snprintf(
        json, sizeof(json),
        "{\"version\":1,\"roots\":[{\"name\":\"workspace\",\"entries\":[{\"path\":\"\","
        "\"type\":\"dir\",\"mode\":493,\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"atime\":[0,0]},"
        "{\"path\":\"a\",\"type\":\"symlink\",\"target\":\"%s\",\"mode\":0,\"uid\":0,\"gid\":0,"
        "\"mtime\":[0,0],\"atime\":[0,0]},{\"path\":\"a/x\",\"type\":\"fifo\",\"mode\":0,"
        "\"uid\":0,\"gid\":0,\"mtime\":[0,0],\"atime\":[0,0]}]}]}",
        outside);
    json_t *m = json_loads(json, 0, NULL);
    CHECK_INT_EQ(snap_manifest_check(m, NULL), 0);
    snap_store *s = NULL;
    CHECK_INT_EQ(snap_store_open(store_dir, &s), 0);
    char *err = NULL;
    CHECK(snap_restore(s, m, SNAP_ROOT_WORKSPACE, dst, 0, &err) < 0);
    char x[700];
    snprintf(x, sizeof(x), "%s/x", outside);
    CHECK(access(x, F_OK) < 0);
    free(err);
    json_decref(m);
    snap_store_free(s);
    fs_rm_rf(top);
}
