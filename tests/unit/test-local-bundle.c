/* config.json of a local sandbox: the secure defaults are present, limits and env are mapped. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api-pod.h"
#include "local/container/local-bundle.h"
#include "local/container/local-bundle-shared.h"
#include "local/fs/local-fs.h"
#include "unit.h"

static bool array_has(const json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
        return true;
    return false;
}

static const json_t *mount_at(const json_t *cfg, const char *dest)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(cfg, "mounts"), i, m) {
        if (strcmp(json_string_value(json_object_get(m, "destination")), dest) == 0)
            return m;
    }
    return NULL;
}

TEST(quantities)
{
    int64_t v;
    CHECK_INT_EQ(api_quantity_parse("512Mi", API_RESOURCE_MEMORY, &v), 0);
    CHECK(v == 512LL << 20);
    CHECK_INT_EQ(api_quantity_parse("1G", API_RESOURCE_MEMORY, &v), 0);
    CHECK(v == 1000000000LL);
    CHECK_INT_EQ(api_quantity_parse("500m", API_RESOURCE_CPU, &v), 0);
    CHECK(v == 500);
    CHECK_INT_EQ(api_quantity_parse("2", API_RESOURCE_CPU, &v), 0);
    CHECK(v == 2000);
    CHECK_INT_EQ(api_quantity_parse("0.5", API_RESOURCE_CPU, &v), 0);
    CHECK(v == 500);
    CHECK_INT_EQ(api_quantity_parse("12Qi", API_RESOURCE_MEMORY, &v), -EINVAL);
    CHECK_INT_EQ(api_quantity_parse("", API_RESOURCE_MEMORY, &v), -EINVAL);
    CHECK_INT_EQ(api_quantity_parse("-1", API_RESOURCE_MEMORY, &v), -EINVAL);
    CHECK_INT_EQ(api_quantity_parse("1e30", API_RESOURCE_MEMORY, &v), -EINVAL);
}

TEST(host_bundle_secure_defaults)
{
    char tmpl[] = "/tmp/asb-bundle-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    char bundle[256], config[300];
    snprintf(bundle, sizeof(bundle), "%s/bundle", dir);
    snprintf(config, sizeof(config), "%s/config.json", bundle);
    json_t *env = json_pack("[{s:s, s:s}, {s:s}, {s:s, s:s}]", "name", "FOO", "value", "bar",
                            "name", "EMPTY", "name", "BAD=NAME", "value", "x");
    local_bundle_params p = {
        .bundle_dir = bundle, .hostname = "my-sandbox", .uid = 1000, .gid = 1000,
        .workspace_dir = "/nonexistent/ws", .home_dir = "/nonexistent/home",
        .inject_bin = "/nonexistent/bin", .inject_lib = "/nonexistent/lib", .env = env,
        .memory_limit = 64 << 20, .cpu_millis = 250, .pids_limit = 4096,
        .cgroups_path = "/asb/test",
    };
    char *err = NULL;
    CHECK_INT_EQ(local_bundle_write(&p, &err), 0);
    CHECK(err == NULL);
    json_t *cfg = json_load_file(config, 0, NULL);
    CHECK(cfg != NULL);
    json_t *proc = json_object_get(cfg, "process");
    CHECK(json_is_true(json_object_get(proc, "noNewPrivileges")));
    CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(proc, "user"), "uid")), 1000);
    json_t *caps = json_object_get(proc, "capabilities");
    const char *sets[] = {"bounding", "effective", "inheritable", "permitted", "ambient"};
    for (size_t i = 0; i < 5; i++)
        CHECK_INT_EQ(json_array_size(json_object_get(caps, sets[i])), 0);
    json_t *args = json_object_get(proc, "args");
    CHECK_STR_EQ(json_string_value(json_array_get(args, 0)), "/.asb/lib/ld-linux-x86-64.so.2");
    CHECK(array_has(args, "--rest-fd") && array_has(args, "--grpc-fd"));
    json_t *penv = json_object_get(proc, "env");
    CHECK(array_has(penv, "FOO=bar") && array_has(penv, "EMPTY=") && !array_has(penv, "BAD=NAME=x"));
    CHECK(json_is_true(json_object_get(json_object_get(cfg, "root"), "readonly")));
    CHECK_STR_EQ(json_string_value(json_object_get(cfg, "hostname")), "my-sandbox");
    json_t *lx = json_object_get(cfg, "linux");
    CHECK_INT_EQ(json_array_size(json_object_get(lx, "namespaces")), 6);
    /* A cgroup namespace of its own: /proc/self/cgroup shows "/", not /asb/<uid>. */
    const json_t *last_ns = json_array_get(json_object_get(lx, "namespaces"), 5);
    CHECK_STR_EQ(json_string_value(json_object_get(last_ns, "type")), "cgroup");
    CHECK(array_has(json_object_get(lx, "maskedPaths"), "/proc/kcore"));
    CHECK(array_has(json_object_get(lx, "maskedPaths"), "/proc/cmdline"));
    CHECK(array_has(json_object_get(lx, "maskedPaths"), "/sys/devices/virtual/powercap"));
    CHECK(array_has(json_object_get(lx, "readonlyPaths"), "/proc/sys"));
    /* The allowlist itself is tested in test-local-seccomp.c. */
    json_t *sc = json_object_get(lx, "seccomp");
    CHECK_STR_EQ(json_string_value(json_object_get(sc, "defaultAction")), "SCMP_ACT_ERRNO");
    CHECK(json_array_size(json_object_get(sc, "syscalls")) > 10);
    json_t *res = json_object_get(lx, "resources");
    CHECK(json_integer_value(json_object_get(json_object_get(res, "memory"), "limit")) == 64 << 20);
    CHECK(json_integer_value(json_object_get(json_object_get(res, "cpu"), "quota")) == 25000);
    CHECK(json_integer_value(json_object_get(json_object_get(res, "pids"), "limit")) == 4096);
    /* Host binds are read-only; the workspace is writable; sandboxd's dirs are read-only. */
    const json_t *usr = mount_at(cfg, "/usr");
    CHECK(usr && array_has(json_object_get(usr, "options"), "ro"));
    const json_t *ws = mount_at(cfg, "/workspace");
    CHECK(ws && array_has(json_object_get(ws, "options"), "rw"));
    const json_t *lib = mount_at(cfg, "/.asb/lib");
    CHECK(lib && array_has(json_object_get(lib, "options"), "ro"));
    CHECK(mount_at(cfg, "/etc") != NULL);
    /* The generated /etc names the sandbox user and the hostname, nothing from the host. */
    char path[400], buf[512] = "";
    snprintf(path, sizeof(path), "%s/etc/passwd", bundle);
    FILE *f = fopen(path, "re");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    CHECK(strstr(buf, "sandbox:x:1000:1000:") != NULL);
    snprintf(path, sizeof(path), "%s/etc/shadow", bundle);
    struct stat st;
    CHECK(stat(path, &st) < 0);
    json_decref(cfg);
    json_decref(env);
    CHECK_INT_EQ(fs_rm_rf(dir), 0);
    CHECK(stat(dir, &st) < 0);
}

static json_t *bundle_config(const char *bundle)
{
    char config[400];
    snprintf(config, sizeof(config), "%s/config.json", bundle);
    return json_load_file(config, 0, NULL);
}

static ino_t inode_of(const char *dir, const char *leaf)
{
    char path[400];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, leaf);
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* The namespace entry of `type`, or NULL. */
static const json_t *namespace_of(const json_t *cfg, const char *type)
{
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(json_object_get(cfg, "linux"), "namespaces"), i, n) {
        if (strcmp(json_string_value(json_object_get(n, "type")), type) == 0)
            return n;
    }
    return NULL;
}

/* A user namespace made by asb serve (local-userns.h) is joined by path, with the maps still
 * named; runc then runs in the network namespace itself, so config.json names none. Without
 * it, runc creates the user namespace and joins the network namespace by path. */
TEST(user_namespace_joined_by_path)
{
    char tmpl[] = "/tmp/asb-bundle-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    char bundle[256], config[300];
    snprintf(bundle, sizeof(bundle), "%s/bundle", dir);
    snprintf(config, sizeof(config), "%s/config.json", bundle);
    local_bundle_params p = {
        .bundle_dir = bundle, .hostname = "ns", .uid = 1000, .gid = 1000,
        .workspace_dir = "/nonexistent/ws", .home_dir = "/nonexistent/home",
        .inject_bin = "/nonexistent/bin", .inject_lib = "/nonexistent/lib", .pids_limit = 4096,
        .cgroups_path = "/asb/test", .netns_path = "/nonexistent/net/ns",
        .userns_start = 0x80000000u, .userns_size = 65536, .userns_path = "/proc/42/ns/user",
    };
    for (int joined = 1; joined >= 0; joined--) {
        p.userns_path = joined ? "/proc/42/ns/user" : NULL;
        char *err = NULL;
        CHECK_INT_EQ(local_bundle_write(&p, &err), 0);
        CHECK(err == NULL);
        json_t *cfg = json_load_file(config, 0, NULL);
        CHECK(cfg != NULL);
        const json_t *user = namespace_of(cfg, "user"), *net = namespace_of(cfg, "network");
        CHECK(user != NULL);
        const json_t *uidmap = json_array_get(
            json_object_get(json_object_get(cfg, "linux"), "uidMappings"), 0);
        CHECK(json_integer_value(json_object_get(uidmap, "hostID")) == 0x80000000);
        CHECK(json_integer_value(json_object_get(uidmap, "size")) == 65536);
        if (joined) {
            CHECK_STR_EQ(json_string_value(json_object_get(user, "path")), "/proc/42/ns/user");
            CHECK(net == NULL);
        } else {
            CHECK(json_object_get(user, "path") == NULL);
            CHECK(net != NULL);
            CHECK_STR_EQ(json_string_value(json_object_get(net, "path")), "/nonexistent/net/ns");
        }
        json_decref(cfg);
    }
    CHECK_INT_EQ(fs_rm_rf(dir), 0);
}

/* Bundles of one state directory share the `host` skeleton and the constant /etc files; what
 * names the sandbox stays its own, a rewrite never writes through a shared file, and a mount
 * point the skeleton lacks gives the bundle a skeleton of its own, leaving the shared one as
 * it was. */
TEST(host_skeleton_and_etc_shared)
{
    char tmpl[] = "/tmp/asb-shared-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    char shared[256], b1[256], b2[256], b3[256], path[400];
    snprintf(shared, sizeof(shared), "%s/shared", dir);
    snprintf(b1, sizeof(b1), "%s/one", dir);
    snprintf(b2, sizeof(b2), "%s/two", dir);
    snprintf(b3, sizeof(b3), "%s/three", dir);
    local_bundle_params p = {
        .bundle_dir = b1, .hostname = "one", .uid = 1000, .gid = 1000,
        .workspace_dir = "/nonexistent/ws", .home_dir = "/nonexistent/home",
        .inject_bin = "/nonexistent/bin", .inject_lib = "/nonexistent/lib", .pids_limit = 10,
        .cgroups_path = "/asb/test", .shared_dir = shared,
    };
    char *err = NULL, *root1 = NULL, *root2 = NULL, *root3 = NULL;
    CHECK_INT_EQ(local_bundle_write_rooted(&p, &root1, &err), 0);
    p.bundle_dir = b2;
    p.hostname = "two";
    CHECK_INT_EQ(local_bundle_write_rooted(&p, &root2, &err), 0);
    CHECK(root1 && root2 && strcmp(root1, root2) == 0);
    CHECK(strncmp(root1, shared, strlen(shared)) == 0);
    json_t *cfg = bundle_config(b2);
    CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(cfg, "root"), "path")), root1);
    CHECK(json_is_true(json_object_get(json_object_get(cfg, "root"), "readonly")));
    json_decref(cfg);
    /* No skeleton of its own; the shared one has the mount points, /tmp a tmpfs's 1777. */
    struct stat st;
    snprintf(path, sizeof(path), "%s/rootfs", b1);
    CHECK(lstat(path, &st) < 0 && errno == ENOENT);
    snprintf(path, sizeof(path), "%s/tmp", root1);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 01777 && st.st_uid == 0);
    const char *points[] = {"proc", "dev", "sys", "workspace", "home/sandbox", ".asb/bin", "etc"};
    for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", root1, points[i]);
        CHECK(lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0755);
    }
    /* passwd is one inode for both; hosts and hostname are per sandbox. */
    char e1[300], e2[300];
    snprintf(e1, sizeof(e1), "%s/etc", b1);
    snprintf(e2, sizeof(e2), "%s/etc", b2);
    CHECK(inode_of(e1, "passwd") != 0 && inode_of(e1, "passwd") == inode_of(e2, "passwd"));
    CHECK(inode_of(e1, "nsswitch.conf") == inode_of(e2, "nsswitch.conf"));
    CHECK(inode_of(e1, "hosts") != inode_of(e2, "hosts"));
    CHECK(inode_of(e1, "hostname") != inode_of(e2, "hostname"));
    /* Rewriting bundle two for another user replaces its link, bundle one keeps its passwd. */
    p.uid = p.gid = 1234;
    CHECK_INT_EQ(local_bundle_write(&p, &err), 0);
    CHECK(inode_of(e1, "passwd") != inode_of(e2, "passwd"));
    char buf[512] = "";
    snprintf(path, sizeof(path), "%s/passwd", e1);
    FILE *f = fopen(path, "re");
    CHECK(f != NULL);
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    CHECK(strstr(buf, "sandbox:x:1000:1000:") != NULL && !strstr(buf, "1234"));
    /* A volume at /data: not in the skeleton, so a skeleton of its own; /workspace/sub lies in
     * the workspace bind and needs nothing. */
    local_bundle_volume vols[] = {{.dest = (char *)"/workspace/sub", .source = (char *)"/nonexistent/v"},
                                  {.dest = (char *)"/data", .source = (char *)"/nonexistent/v"}};
    p.bundle_dir = b3;
    p.volumes = vols;
    p.n_volumes = 1;
    CHECK_INT_EQ(local_bundle_write_rooted(&p, &root3, &err), 0);
    CHECK(root3 && strcmp(root3, root1) == 0);
    free(root3);
    p.n_volumes = 2;
    CHECK_INT_EQ(local_bundle_write_rooted(&p, &root3, &err), 0);
    snprintf(path, sizeof(path), "%s/rootfs", b3);
    CHECK(root3 && strcmp(root3, path) == 0);
    snprintf(path, sizeof(path), "%s/data", root1);
    CHECK(lstat(path, &st) < 0 && errno == ENOENT);
    CHECK(err == NULL);
    free(root1);
    free(root2);
    free(root3);
    CHECK_INT_EQ(fs_rm_rf(dir), 0);
}

static void slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* A torn-down bundle becomes a spare that the next bundle takes over: its files are rewritten
 * in place (same inodes) or relinked, the pid file is gone; a bundle holding anything else (its
 * own rootfs skeleton) is not kept. */
TEST(spare_bundles_are_reused)
{
    char tmpl[] = "/tmp/asb-spare-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    char shared[256], b1[256], b2[256], b3[256], path[400], buf[512];
    snprintf(shared, sizeof(shared), "%s/shared", dir);
    snprintf(b1, sizeof(b1), "%s/one", dir);
    snprintf(b2, sizeof(b2), "%s/two", dir);
    snprintf(b3, sizeof(b3), "%s/three", dir);
    local_bundle_params p = {
        .bundle_dir = b1, .hostname = "one", .uid = 1000, .gid = 1000,
        .workspace_dir = "/nonexistent/ws", .home_dir = "/nonexistent/home",
        .inject_bin = "/nonexistent/bin", .inject_lib = "/nonexistent/lib", .pids_limit = 10,
        .cgroups_path = "/asb/test", .shared_dir = shared,
    };
    char *err = NULL, e1[300], e2[300];
    snprintf(e1, sizeof(e1), "%s/etc", b1);
    snprintf(e2, sizeof(e2), "%s/etc", b2);
    CHECK_INT_EQ(local_bundle_write(&p, &err), 0);
    ino_t hosts = inode_of(e1, "hosts"), config = inode_of(b1, "config.json");
    snprintf(path, sizeof(path), "%s/pid", b1);
    CHECK_INT_EQ(fs_write_file(path, "42\n", 0644), 0);
    CHECK_INT_EQ(local_shared_bundle_take(shared, b2), -ENOENT);
    CHECK_INT_EQ(local_shared_bundle_recycle(shared, b1), 0);
    struct stat st;
    CHECK(stat(b1, &st) < 0 && errno == ENOENT);
    p.bundle_dir = b2;
    p.hostname = "two";
    p.uid = p.gid = 1234;
    CHECK_INT_EQ(local_bundle_write(&p, &err), 0);
    CHECK(hosts != 0 && inode_of(e2, "hosts") == hosts);
    CHECK(inode_of(b2, "config.json") == config);
    snprintf(path, sizeof(path), "%s/pid", b2);
    CHECK(stat(path, &st) < 0 && errno == ENOENT);
    snprintf(path, sizeof(path), "%s/hosts", e2);
    slurp(path, buf, sizeof(buf));
    CHECK(strstr(buf, "localhost two\n") != NULL && !strstr(buf, "one"));
    snprintf(path, sizeof(path), "%s/passwd", e2);
    slurp(path, buf, sizeof(buf));
    CHECK(strstr(buf, "sandbox:x:1234:1234:") != NULL);
    CHECK(stat(path, &st) == 0 && st.st_nlink >= 2);
    json_t *cfg = bundle_config(b2);
    CHECK_STR_EQ(json_string_value(json_object_get(cfg, "hostname")), "two");
    json_decref(cfg);
    /* A bundle with a skeleton of its own (a volume at /data) is not kept. */
    local_bundle_volume vols[] = {{.dest = (char *)"/data", .source = (char *)"/nonexistent/v"}};
    p.bundle_dir = b3;
    p.volumes = vols;
    p.n_volumes = 1;
    CHECK_INT_EQ(local_bundle_write(&p, &err), 0);
    CHECK(local_shared_bundle_recycle(shared, b3) < 0);
    CHECK(stat(b3, &st) == 0);
    CHECK(err == NULL);
    CHECK_INT_EQ(fs_rm_rf(dir), 0);
}
