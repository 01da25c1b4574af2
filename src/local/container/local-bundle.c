/* config.json and rootfs skeleton of a local sandbox. See local-bundle.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/hash.h"
#include "api/api.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/path-util.h"
#include "local/container/local-bundle.h"
#include "local/runtime/local-runtime-gvisor.h"
#include "local/container/local-bundle-shared.h"
#include "local/fs/local-fs.h"
#include "local/container/local-seccomp.h"
#include "local/container/local-idmap.h"

#define SANDBOX_HOME "/home/sandbox"
#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Host directories the `host` image shares read-only (a symlink on the host, as with merged
 * /usr, becomes the same symlink in the rootfs). */
static const char *const host_dirs[] = {"usr", "bin", "lib", "lib32", "lib64", "libx32", "sbin"};

/* What Docker and Kubernetes mask (runc's `runc spec` defaults and powercap, whose energy
 * counters are a side channel), and the host kernel's boot command line and configuration.
 * runc skips a path the kernel does not have. */
static const char *const masked_paths[] = {
    "/proc/acpi",         "/proc/asound",      "/proc/kcore",        "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",  "/proc/sched_debug",
    "/proc/scsi",         "/proc/cmdline",     "/proc/config.gz",    "/sys/firmware",
    "/sys/devices/virtual/powercap",
};
static const char *const readonly_paths[] = {
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

static json_t *str_array(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *mount_entry(const char *dest, const char *type, const char *source,
                           const char *const *opts, size_t n_opts)
{
    return json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type", type, "source", source,
                     "options", str_array(opts, n_opts));
}

static void add_bind(json_t *mounts, const char *dest, const char *source, bool ro)
{
    static const char *const ro_opts[] = {"rbind", "ro", "nosuid", "nodev"};
    static const char *const rw_opts[] = {"rbind", "rw", "nosuid", "nodev"};
    json_array_append_new(mounts, ro ? mount_entry(dest, "bind", source, ro_opts, 4)
                                     : mount_entry(dest, "bind", source, rw_opts, 4));
}

static json_t *base_mounts(bool tmpfs_tmp)
{
    static const char *const proc[] = {"nosuid", "noexec", "nodev"};
    static const char *const dev[] = {"nosuid", "strictatime", "mode=755", "size=65536k"};
    static const char *const pts[] = {"nosuid", "noexec", "newinstance", "ptmxmode=0666",
                                      "mode=0620", "gid=5"};
    static const char *const shm[] = {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"};
    static const char *const mq[] = {"nosuid", "noexec", "nodev"};
    static const char *const sys[] = {"nosuid", "noexec", "nodev", "ro"};
    static const char *const cg[] = {"nosuid", "noexec", "nodev", "relatime", "ro"};
    static const char *const tmp[] = {"nosuid", "nodev", "mode=1777", "size=1g"};
    json_t *m = json_array();
    json_array_append_new(m, mount_entry("/proc", "proc", "proc", proc, ELEMENTSOF(proc)));
    json_array_append_new(m, mount_entry("/dev", "tmpfs", "tmpfs", dev, ELEMENTSOF(dev)));
    json_array_append_new(m, mount_entry("/dev/pts", "devpts", "devpts", pts, ELEMENTSOF(pts)));
    json_array_append_new(m, mount_entry("/dev/shm", "tmpfs", "shm", shm, ELEMENTSOF(shm)));
    json_array_append_new(m, mount_entry("/dev/mqueue", "mqueue", "mqueue", mq, ELEMENTSOF(mq)));
    json_array_append_new(m, mount_entry("/sys", "sysfs", "sysfs", sys, ELEMENTSOF(sys)));
    json_array_append_new(m,
                          mount_entry("/sys/fs/cgroup", "cgroup", "cgroup", cg, ELEMENTSOF(cg)));
    if (tmpfs_tmp)
        json_array_append_new(m, mount_entry("/tmp", "tmpfs", "tmpfs", tmp, ELEMENTSOF(tmp)));
    return m;
}

/* Sets "K=V" in env, replacing an earlier entry for K (later sources win). */
static void env_put(json_t *env, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return;
    size_t klen = (size_t)(eq - kv) + 1, i;
    json_t *e;
    json_array_foreach(env, i, e) {
        const char *s = json_string_value(e);
        if (s && strncmp(s, kv, klen) == 0) {
            json_array_set_new(env, i, json_string(kv));
            return;
        }
    }
    json_array_append_new(env, json_string(kv));
}

static json_t *process_env(const local_bundle_params *p)
{
    json_t *env = json_array();
    json_array_append_new(env, json_string(DEFAULT_PATH));
    json_array_append_new(env, json_string("HOME=" SANDBOX_HOME));
    json_array_append_new(env, json_string("USER=sandbox"));
    char *h = NULL;
    if (asprintf(&h, "HOSTNAME=%s", p->hostname) >= 0)
        json_array_append_new(env, json_string(h));
    free(h);
    size_t i;
    json_t *e;
    json_array_foreach(p->image_env, i, e) {
        const char *kv = json_string_value(e);
        if (kv)
            env_put(env, kv);
    }
    json_array_foreach(p->env, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *value = json_string_value(json_object_get(e, "value"));
        if (!name || !*name || strchr(name, '='))
            continue;
        char *kv = NULL;
        if (asprintf(&kv, "%s=%s", name, value ? value : "") >= 0)
            env_put(env, kv);
        free(kv);
    }
    if (p->main_argv && p->socket_dir)
        json_array_append_new(env, json_string("ASB_MAIN_DIR=/.asb/main"));
    if (p->main_argv && !p->socket_dir) {
        json_array_append_new(env, json_string("ASB_MAIN_DIR=/.asb/main"));
        /* The main process's output pipe: write end fd 5, read end fd 6 (oci_run_detached),
         * read by asb serve; sandboxd keeps both. */
        json_array_append_new(env, json_string("ASB_MAIN_OUTPUT_FD=5"));
        json_array_append_new(env, json_string("ASB_MAIN_OUTPUT_KEEP_FD=6"));
    }
    if (p->main_argv && p->working_dir) {
        char *wd = NULL;
        if (asprintf(&wd, "ASB_MAIN_WORKDIR=%s", p->working_dir) >= 0)
            json_array_append_new(env, json_string(wd));
        free(wd);
    }
    return env;
}

static json_t *resources(const local_bundle_params *p)
{
    json_t *r = json_pack("{s:[{s:b, s:s}], s:{s:I}}", "devices", "allow", 0, "access", "rwm",
                          "pids", "limit", (json_int_t)p->pids_limit);
    if (p->memory_limit > 0)
        json_object_set_new(r, "memory",
                            json_pack("{s:I}", "limit", (json_int_t)p->memory_limit));
    if (p->cpu_millis > 0)
        json_object_set_new(r, "cpu",
                            json_pack("{s:I, s:I}", "quota", (json_int_t)(p->cpu_millis * 100),
                                      "period", (json_int_t)100000));
    return r;
}

static json_t *config_json(const local_bundle_params *p, const char *root, json_t *mounts)
{
    /* cgroup: /proc/self/cgroup and the cgroup mounts show the sandbox's own cgroup as "/",
     * not the host's hierarchy and the sandbox's uid in it. */
    static const char *const ns[] = {"pid", "network", "ipc", "uts", "mount", "cgroup"};
    json_t *namespaces = json_array();
    if (p->userns_size && p->userns_path)
        json_array_append_new(namespaces,
                              json_pack("{s:s, s:s}", "type", "user", "path", p->userns_path));
    else if (p->userns_size)
        json_array_append_new(namespaces, json_pack("{s:s}", "type", "user"));
    for (size_t i = 0; i < ELEMENTSOF(ns); i++) {
        /* Joined by runc's own process when the user namespace is given (local-userns.h). */
        if (strcmp(ns[i], "network") == 0 && p->netns_path && p->userns_size && p->userns_path)
            continue;
        json_array_append_new(namespaces,
                              strcmp(ns[i], "network") == 0 && p->netns_path
                                  ? json_pack("{s:s, s:s}", "type", ns[i], "path", p->netns_path)
                                  : json_pack("{s:s}", "type", ns[i]));
    }
    static const char *const args[] = {
        "/.asb/lib/ld-linux-x86-64.so.2", "--library-path", "/.asb/lib", "/.asb/bin/sandboxd",
        "--root-dir", "/workspace", "--listen-host", "127.0.0.1", "--rest-fd", "3", "--grpc-fd",
        "4",
    };
    static const char *const args_bound[] = {
        "/.asb/lib/ld-linux-x86-64.so.2", "--library-path", "/.asb/lib", "/.asb/bin/sandboxd",
        "--root-dir", "/workspace", "--listen-host", "127.0.0.1",
        "--rest-socket", LOCAL_BUNDLE_SOCKET_DIR "/rest.sock",
        "--grpc-socket", LOCAL_BUNDLE_SOCKET_DIR "/grpc.sock",
    };
    json_t *caps = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective",
                             "inheritable", "permitted", "ambient");
    json_t *argv = p->socket_dir ? str_array(args_bound, ELEMENTSOF(args_bound))
                                 : str_array(args, ELEMENTSOF(args));
    if (p->main_argv) {
        json_array_append_new(argv, json_string("--"));
        json_array_extend(argv, (json_t *)p->main_argv);
    }
    json_t *process = json_pack(
        "{s:b, s:{s:i, s:i, s:[i]}, s:o, s:o, s:s, s:o, s:b}", "terminal", 0,
        "user", "uid", (int)p->uid, "gid", (int)p->gid, "additionalGids", (int)p->gid, "args",
        argv, "env", process_env(p), "cwd", p->working_dir ? p->working_dir : "/workspace",
        "capabilities", caps, "noNewPrivileges", 1);
    json_t *linux_ = json_pack("{s:o, s:s, s:o, s:o, s:o, s:o}", "resources", resources(p),
                               "cgroupsPath", p->cgroups_path, "namespaces", namespaces,
                               "maskedPaths", str_array(masked_paths, ELEMENTSOF(masked_paths)),
                               "readonlyPaths",
                               str_array(readonly_paths, ELEMENTSOF(readonly_paths)), "seccomp",
                               local_seccomp_profile_for(p->gvisor));
    if (linux_ && p->userns_size) {
        /* One range for uids and gids: id N inside is host id userns_start + N. */
        const char *keys[] = {"uidMappings", "gidMappings"};
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
            json_object_set_new(linux_, keys[i],
                                json_pack("[{s:I, s:I, s:I}]", "containerID", (json_int_t)0,
                                          "hostID", (json_int_t)p->userns_start, "size",
                                          (json_int_t)p->userns_size));
    }
    /* With a user namespace runc sees the rootfs at LOCAL_IDMAP_ROOTFS (local-idmap.h); the
     * annotation keeps the real path (image garbage collection). */
    return json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o, s:{s:s}}", "ociVersion", "1.0.2",
                     "process", process, "root", "path", p->userns_size ? LOCAL_IDMAP_ROOTFS : root,
                     "readonly", 1, "hostname", p->hostname, "mounts", mounts, "linux", linux_,
                     "annotations", LOCAL_BUNDLE_ROOTFS_ANNOTATION, root);
}

/* A file of the bundle's own: rewritten in place when it is one already (a spare bundle's:
 * no inode made), never written through a link of a shared file. */
static int write_own(const char *path, const char *content)
{
    struct stat st;
    if (lstat(path, &st) == 0 && (!S_ISREG(st.st_mode) || st.st_nlink > 1) && unlink(path) < 0)
        return -errno;
    return fs_write_file(path, content, 0644);
}

/* The generated /etc of the `host` image: only what name lookups and the loader need. */
static int write_etc(const local_bundle_params *p, const char *etc, char **ret_error)
{
    _cleanup_free_ char *passwd = NULL, *group = NULL, *hosts = NULL, *resolv = NULL;
    if (asprintf(&passwd,
                 "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                 "sandbox:x:%u:%u:sandbox:" SANDBOX_HOME ":/bin/sh\n"
                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                 (unsigned)p->uid, (unsigned)p->gid) < 0 ||
        asprintf(&group, "root:x:0:\nsandbox:x:%u:\nnogroup:x:65534:\n", (unsigned)p->gid) < 0 ||
        asprintf(&hosts, "127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
                 p->hostname) < 0 ||
        asprintf(&resolv, "%s\n",
                 p->nameserver ? "" : "# local sandbox: loopback only, no name servers") < 0)
        return -ENOMEM;
    if (p->nameserver) {
        free(resolv);
        if (asprintf(&resolv, "nameserver %s\n", p->nameserver) < 0)
            return -ENOMEM;
    }
    /* shared: the same for most sandboxes, so hard links of one shared file (no inode made or
     * freed per sandbox); hosts and hostname name the sandbox. */
    const struct {
        const char *name, *content;
        bool shared;
    } files[] = {
        {"passwd", passwd, true},
        {"group", group, true},
        {"hosts", hosts, false},
        {"hostname", p->hostname, false},
        {"resolv.conf", resolv, true},
        {"nsswitch.conf",
         p->nameserver ? "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                       : "passwd: files\ngroup: files\nshadow: files\nhosts: files\n",
         true},
    };
    int r = mkdir_p(etc, 0755);
    for (size_t i = 0; r == 0 && i < ELEMENTSOF(files); i++) {
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/%s", etc, files[i].name) < 0)
            return -ENOMEM;
        if (files[i].shared && p->shared_dir)
            r = local_shared_link_content(p->shared_dir, files[i].content, path);
        else
            r = write_own(path, files[i].content);
    }
    if (r == 0) {
        /* The loader cache lets host binaries find their libraries quickly; not a secret. */
        _cleanup_free_ char *cache = NULL;
        if (asprintf(&cache, "%s/ld.so.cache", etc) < 0)
            return -ENOMEM;
        if (access("/etc/ld.so.cache", R_OK) == 0)
            r = p->shared_dir
                    ? local_shared_link_copy(p->shared_dir, "/etc/ld.so.cache", cache)
                    : fs_copy_file("/etc/ld.so.cache", cache, 0644);
    }
    if (r < 0 && asprintf(ret_error, "cannot write the sandbox /etc in %s: %s", etc,
                          strerror(-r)) < 0)
        *ret_error = NULL;
    return r;
}

/* The symlinks of the `host` image's rootfs skeleton in rootfs (made if missing): the host's
 * /bin, /lib... when they are symlinks (merged /usr). */
static int host_links(const char *rootfs)
{
    int r = mkdir_p(rootfs, 0755);
    for (size_t i = 0; r == 0 && i < ELEMENTSOF(host_dirs); i++) {
        char host[PATH_MAX], link[PATH_MAX], inside[PATH_MAX];
        snprintf(host, sizeof(host), "/%s", host_dirs[i]);
        snprintf(inside, sizeof(inside), "%s/%s", rootfs, host_dirs[i]);
        struct stat st;
        if (lstat(host, &st) < 0 || !S_ISLNK(st.st_mode))
            continue;
        ssize_t n = readlink(host, link, sizeof(link) - 1);
        if (n < 0)
            continue;
        link[n] = '\0';
        unlink(inside);
        if (symlink(link, inside) < 0)
            r = -errno;
    }
    return r;
}

/* Read-only binds of the host's directories (host_dirs) that exist here. */
static void add_host_dir_binds(json_t *mounts)
{
    for (size_t i = 0; i < ELEMENTSOF(host_dirs); i++) {
        char host[PATH_MAX];
        snprintf(host, sizeof(host), "/%s", host_dirs[i]);
        struct stat st;
        if (lstat(host, &st) == 0 && S_ISDIR(st.st_mode))
            add_bind(mounts, host, host, true);
    }
}

/* The mounts of the `host` image: read-only binds of the host's directories and the generated
 * /etc (bundle_dir/etc). */
static int host_mounts(const local_bundle_params *p, json_t *mounts, char **ret_error)
{
    add_host_dir_binds(mounts);
    _cleanup_free_ char *etc = NULL;
    if (asprintf(&etc, "%s/etc", p->bundle_dir) < 0)
        return -ENOMEM;
    int r = write_etc(p, etc, ret_error);
    if (r < 0)
        return r;
    add_bind(mounts, "/etc", etc, true);
    /* Debian's alternatives are symlinks (awk, editor, ...): shared read-only, mount point made
     * here because /etc is read-only by the time runc mounts it. */
    struct stat st;
    _cleanup_free_ char *alt = NULL;
    if (asprintf(&alt, "%s/alternatives", etc) < 0)
        return -ENOMEM;
    if (stat("/etc/alternatives", &st) == 0 && S_ISDIR(st.st_mode) && mkdir_p(alt, 0755) == 0)
        add_bind(mounts, "/etc/alternatives", "/etc/alternatives", true);
    return 0;
}

/* Makes the mount point of one mount in the rootfs, as runc would: directories (or an empty
 * file for a file bind), one component at a time on directory fds, never following a symlink
 * (an image's symlinked or odd mount point is left to runc, which resolves it inside the
 * rootfs). Best effort. */
static void mount_point(int root_fd, const json_t *m)
{
    const char *dest = json_string_value(json_object_get(m, "destination"));
    const char *type = json_string_value(json_object_get(m, "type"));
    const char *src = json_string_value(json_object_get(m, "source"));
    struct stat st;
    bool file =
        type && src && strcmp(type, "bind") == 0 && stat(src, &st) == 0 && !S_ISDIR(st.st_mode);
    if (!dest || dest[0] != '/')
        return;
    mode_t tmpfs_mode = 0755;
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(m, "options"), i, o) {
        const char *opt = json_string_value(o);
        if (type && strcmp(type, "tmpfs") == 0 && opt && strncmp(opt, "mode=", 5) == 0)
            tmpfs_mode = (mode_t)strtoul(opt + 5, NULL, 8) & 07777;
    }
    _cleanup_free_ char *path = strdup(dest + 1);
    _cleanup_close_ int dfd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
    char *save = NULL;
    for (char *c = path ? strtok_r(path, "/", &save) : NULL; c && dfd >= 0;
         c = strtok_r(NULL, "/", &save)) {
        bool last = !save || !*save;
        if (strcmp(c, ".") == 0 || strcmp(c, "..") == 0)
            return;
        if (last && file) {
            int fd = openat(dfd, c, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd >= 0) {
                (void)!fchmod(fd, 0644); /* umask notwithstanding */
                close(fd);
            }
            return;
        }
        int nfd = openat(dfd, c, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && mkdirat(dfd, c, 0755) == 0) {
            nfd = openat(dfd, c, O_RDONLY | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
            /* umask notwithstanding: searchable inside; runc gives a tmpfs the mode of an
             * existing mount point, so that one gets its mode= option (/tmp: 1777) */
            if (nfd >= 0)
                (void)!fchmod(nfd, last ? tmpfs_mode : 0755);
        }
        close(dfd);
        dfd = nfd;
    }
}

/* A fresh sysfs shows the network devices of the mounter's network namespace, so the kernel
 * refuses it to a user namespace that does not own the namespace it joined (bridge networking:
 * local-net.c creates it from the host). There /sys is a read-only skeleton of the bundle with
 * the host's CPU topology (nproc, BLAS libraries) and the cgroup mounts; no host device
 * names. */
static int sys_dirs(const char *parent, void *payload)
{
    (void)payload;
    /* Parents first. Made relative to the parent: a mkdir_p of each absolute path would lock
     * every directory above it again (the state dir's parents are shared, /tmp in the tests:
     * ~10 ms a sandbox on a busy machine). */
    static const char *const dirs[] = {"sys",         "sys/fs",          "sys/fs/cgroup",
                                       "sys/devices", "sys/devices/system",
                                       "sys/devices/system/cpu"};
    _cleanup_close_ int bfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (bfd < 0)
        return -errno;
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        if (mkdirat(bfd, dirs[i], 0755) < 0 && errno != EEXIST)
            return -errno;
        if (fchmodat(bfd, dirs[i], 0755, 0) < 0) /* mkdirat obeys the umask */
            return -errno;
    }
    return 0;
}

static int sys_skeleton(const local_bundle_params *p, json_t *mounts)
{
    /* The same empty directories for every sandbox: shared when the state dir shares. */
    _cleanup_free_ char *parent = NULL, *sys = NULL;
    int r = p->shared_dir ? local_shared_dir(p->shared_dir, "sys-1", sys_dirs, NULL, &parent)
                          : sys_dirs(p->bundle_dir, NULL);
    if (r < 0)
        return r;
    if (asprintf(&sys, "%s/sys", parent ? parent : p->bundle_dir) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < json_array_size(mounts); i++) {
        const char *dest =
            json_string_value(json_object_get(json_array_get(mounts, i), "destination"));
        if (!dest || strcmp(dest, "/sys") != 0)
            continue;
        static const char *const ro_opts[] = {"rbind", "ro", "nosuid", "nodev", "noexec"};
        json_array_set_new(mounts, i,
                           mount_entry("/sys", "bind", sys, ro_opts, ELEMENTSOF(ro_opts)));
        struct stat st;
        if (stat("/sys/devices/system/cpu", &st) == 0)
            json_array_insert_new(mounts, i + 1,
                                  mount_entry("/sys/devices/system/cpu", "bind",
                                              "/sys/devices/system/cpu", ro_opts,
                                              ELEMENTSOF(ro_opts)));
        break;
    }
    return 0;
}

static void mount_points(const char *rootfs, const json_t *mounts)
{
    _cleanup_close_ int fd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    size_t i;
    json_t *m;
    json_array_foreach(mounts, i, m) {
        if (fd >= 0)
            mount_point(fd, m);
    }
}

/* The shared `host` skeleton: the host's symlinks and the mount point of every mount a
 * `host` sandbox without volumes has, made once for all (as runc would make them, and with a
 * user namespace runc cannot). */
static int skeleton_fill(const char *dir, void *payload)
{
    (void)payload;
    int r = host_links(dir);
    if (r < 0)
        return r;
    json_t *mounts = base_mounts(true);
    if (!mounts)
        return -ENOMEM;
    add_host_dir_binds(mounts);
    /* Directory binds: "/" only tells mount_point the source is a directory. */
    static const char *const binds[] = {"/etc",      "/workspace", SANDBOX_HOME,
                                        "/.asb/bin", "/.asb/lib",  "/.asb/main",
                                        LOCAL_BUNDLE_SOCKET_DIR};
    for (size_t i = 0; i < ELEMENTSOF(binds); i++)
        add_bind(mounts, binds[i], "/", true);
    mount_points(dir, mounts);
    json_decref(mounts);
    return 0;
}

/* *ret (owned): the shared skeleton, named after what the host's directories are (a host whose
 * /lib64 turns from a directory into a symlink gets a new one). */
static int shared_skeleton(const char *shared_dir, char **ret)
{
    uint64_t h = fnv1a64_str("host-rootfs-1");
    for (size_t i = 0; i < ELEMENTSOF(host_dirs); i++) {
        char host[PATH_MAX], link[PATH_MAX] = "";
        snprintf(host, sizeof(host), "/%s", host_dirs[i]);
        struct stat st;
        char kind = lstat(host, &st) < 0      ? '-'
                    : S_ISLNK(st.st_mode) ? 'l'
                    : S_ISDIR(st.st_mode) ? 'd'
                                          : '?';
        if (kind == 'l') {
            ssize_t n = readlink(host, link, sizeof(link) - 1);
            link[n < 0 ? 0 : n] = '\0';
        }
        h = fnv1a64_update(h, host, strlen(host) + 1);
        h = fnv1a64_update(h, &kind, 1);
        h = fnv1a64_update(h, link, strlen(link) + 1);
    }
    char name[48];
    snprintf(name, sizeof(name), "host-rootfs-%016" PRIx64, h);
    return local_shared_dir(shared_dir, name, skeleton_fill, NULL, ret);
}

/* Whether dest (absolute) exists under root_fd, no component a symlink. */
static bool exists_in(int root_fd, const char *dest)
{
    _cleanup_free_ char *path = strdup(dest + 1);
    _cleanup_close_ int dfd = path ? fcntl(root_fd, F_DUPFD_CLOEXEC, 3) : -1;
    char *save = NULL;
    for (char *c = dfd >= 0 ? strtok_r(path, "/", &save) : NULL; c;
         c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0 || strcmp(c, "..") == 0)
            return false;
        int nfd = openat(dfd, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0)
            return false;
        close(dfd);
        dfd = nfd;
    }
    struct stat st;
    return dfd >= 0 && fstat(dfd, &st) == 0 && !S_ISLNK(st.st_mode);
}

/* Whether runc finds the mount point of every mount with root as the rootfs, so that nothing
 * is ever made in it: each either exists there or lies inside an earlier mount (a tmpfs, a
 * bind), where runc makes it in that mount, not in the rootfs. */
static bool skeleton_covers(const char *root, const json_t *mounts)
{
    _cleanup_close_ int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    for (size_t i = 0; i < json_array_size(mounts); i++) {
        const char *dest =
            json_string_value(json_object_get(json_array_get(mounts, i), "destination"));
        bool inside = false;
        for (size_t j = 0; dest && j < i && !inside; j++) {
            const char *d =
                json_string_value(json_object_get(json_array_get(mounts, j), "destination"));
            size_t n = d ? strlen(d) : 0;
            inside = n > 1 && strncmp(dest, d, n) == 0 && dest[n] == '/';
        }
        if (!dest || dest[0] != '/' || (!inside && !exists_in(fd, dest)))
            return false;
    }
    return true;
}

/* The rootfs of a `host` bundle: the shared skeleton when it covers the mounts, else
 * bundle_dir/rootfs with its own skeleton. *ret owned; *ret_shared says which. */
static int host_root(const local_bundle_params *p, const json_t *mounts, char **ret,
                     bool *ret_shared, char **ret_error)
{
    _cleanup_free_ char *shared = NULL, *own = NULL;
    *ret_shared = false;
    if (p->shared_dir && shared_skeleton(p->shared_dir, &shared) == 0 &&
        skeleton_covers(shared, mounts)) {
        *ret = TAKE_PTR(shared);
        *ret_shared = true;
        return 0;
    }
    if (asprintf(&own, "%s/rootfs", p->bundle_dir) < 0)
        return -ENOMEM;
    int r = host_links(own);
    if (r < 0) {
        if (asprintf(ret_error, "cannot prepare the rootfs %s: %s", own, strerror(-r)) < 0)
            *ret_error = NULL;
        return r;
    }
    *ret = TAKE_PTR(own);
    return 0;
}

int local_bundle_write(const local_bundle_params *p, char **ret_error)
{
    return local_bundle_write_rooted(p, NULL, ret_error);
}

int local_bundle_write_rooted(const local_bundle_params *p, char **ret_root, char **ret_error)
{
    return local_bundle_write_staged(p, ret_root, NULL, ret_error);
}

/* Replaces the source of every bind in mounts with LOCAL_BUNDLE_STAGE_DIR/<i>; *ret (owned)
 * gets the real sources in order, as a JSON array of strings. */
static int stage_binds(json_t *mounts, json_t **ret)
{
    _cleanup_(json_decrefp) json_t *v = json_array();
    if (!v)
        return -ENOMEM;
    size_t i;
    json_t *m;
    json_array_foreach(mounts, i, m) {
        const char *type = json_string_value(json_object_get(m, "type"));
        json_t *src = json_object_get(m, "source");
        if (!type || strcmp(type, "bind") != 0 || !json_is_string(src))
            continue;
        char staged[sizeof(LOCAL_BUNDLE_STAGE_DIR) + 24];
        snprintf(staged, sizeof(staged), LOCAL_BUNDLE_STAGE_DIR "/%zu", json_array_size(v));
        if (json_array_append(v, src) < 0 ||
            json_object_set_new(m, "source", json_string(staged)) < 0)
            return -ENOMEM;
    }
    *ret = TAKE_PTR(v);
    return 0;
}

int local_bundle_write_staged(const local_bundle_params *p, char **ret_root, json_t **ret_sources,
                              char **ret_error)
{
    *ret_error = NULL;
    if (ret_sources)
        *ret_sources = NULL;
    if (ret_root)
        *ret_root = NULL;
    /* A spare bundle of a sandbox gone, when there is one: its directories and files are
     * reused (local-bundle-shared.h). */
    if (p->shared_dir && !p->rootfs && access(p->bundle_dir, F_OK) < 0 && errno == ENOENT)
        (void)local_shared_bundle_take(p->shared_dir, p->bundle_dir);
    int r = mkdir_p(p->bundle_dir, 0711);
    if (r < 0) {
        if (asprintf(ret_error, "cannot create the bundle %s: %s", p->bundle_dir, strerror(-r)) <
            0)
            *ret_error = NULL;
        return r;
    }
    _cleanup_free_ char *rootfs = NULL, *config = NULL, *text = NULL;
    if (asprintf(&config, "%s/config.json", p->bundle_dir) < 0)
        return -ENOMEM;
    _cleanup_(json_decrefp) json_t *mounts = base_mounts(!p->tmp_dir);
    if (!mounts)
        return -ENOMEM;
    if (p->userns_size && p->netns_path && (r = sys_skeleton(p, mounts)) < 0) {
        if (asprintf(ret_error, "cannot prepare /sys in %s: %s", p->bundle_dir, strerror(-r)) < 0)
            *ret_error = NULL;
        return r;
    }
    if (!p->rootfs && (r = host_mounts(p, mounts, ret_error)) < 0)
        return r;
    add_bind(mounts, "/workspace", p->workspace_dir, false);
    add_bind(mounts, SANDBOX_HOME, p->home_dir, false);
    if (p->tmp_dir)
        add_bind(mounts, "/tmp", p->tmp_dir, false);
    for (size_t i = 0; i < p->n_volumes; i++)
        add_bind(mounts, p->volumes[i].dest, p->volumes[i].source, p->volumes[i].readonly);
    add_bind(mounts, "/.asb/bin", p->inject_bin, true);
    add_bind(mounts, "/.asb/lib", p->inject_lib, true);
    if (p->main_argv && p->main_dir)
        add_bind(mounts, "/.asb/main", p->main_dir, false);
    if (p->socket_dir)
        add_bind(mounts, LOCAL_BUNDLE_SOCKET_DIR, p->socket_dir, false);
    if (p->rootfs && p->nameserver) {
        /* An image's /etc/resolv.conf (when it has one to mount over) names the forwarder. */
        _cleanup_free_ char *target = NULL, *src = NULL, *line = NULL;
        struct stat st;
        if (asprintf(&target, "%s/etc/resolv.conf", p->rootfs) < 0 ||
            asprintf(&src, "%s/resolv.conf", p->bundle_dir) < 0 ||
            asprintf(&line, "nameserver %s\n", p->nameserver) < 0)
            return -ENOMEM;
        if (lstat(target, &st) == 0 && S_ISREG(st.st_mode) &&
            fs_write_file(src, line, 0644) == 0)
            add_bind(mounts, "/etc/resolv.conf", src, true);
    }
    bool shared = false;
    if (!p->rootfs && (r = host_root(p, mounts, &rootfs, &shared, ret_error)) < 0)
        return r;
    const char *root = rootfs ? rootfs : p->rootfs;
    /* The shared skeleton has every mount point already and is never written to. */
    if (p->userns_size && !shared)
        mount_points(root, mounts);
    /* After the mount points: those are made from the real sources' types. */
    _cleanup_(json_decrefp) json_t *staged = NULL;
    if (ret_sources && (r = stage_binds(mounts, &staged)) < 0)
        return r;
    json_t *cfg = config_json(p, root, json_incref(mounts));
    text = cfg ? json_dumps(cfg, JSON_INDENT(2)) : NULL;
    json_decref(cfg);
    if (!text)
        return -ENOMEM;
    r = fs_write_file(config, text, 0600);
    if (r < 0 && asprintf(ret_error, "cannot write %s: %s", config, strerror(-r)) < 0)
        *ret_error = NULL;
    if (r == 0 && ret_root && !(*ret_root = strdup(root)))
        return -ENOMEM;
    if (r == 0 && ret_sources)
        *ret_sources = TAKE_PTR(staged);
    return r;
}

void local_bundle_volumes_free(local_bundle_volume *v, size_t n, char **names)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].dest);
        free(v[i].source);
        free(v[i].claim);
        free(v[i].sub_path);
    }
    free(v);
    for (size_t i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

static int vol_fail(char **ret_error, const char *fmt, const char *a, const char *b)
{
    if (asprintf(ret_error, fmt, a, b) < 0)
        *ret_error = NULL;
    return -EINVAL;
}

int local_bundle_volumes(const json_t *sb, const char *volumes_dir, local_bundle_volume **ret,
                         size_t *ret_n, char ***ret_names, char **ret_error)
{
    const json_t *spec = json_object_get(sb, "spec");
    const json_t *vcts = json_object_get(spec, "volumeClaimTemplates");
    const json_t *ctr = json_array_get(
        json_object_get(json_object_get(json_object_get(spec, "podTemplate"), "spec"),
                        "containers"),
        0);
    const json_t *mounts = json_object_get(ctr, "volumeMounts");
    size_t nv = json_array_size(vcts), nm = json_array_size(mounts), n = 0;
    *ret = NULL;
    *ret_n = 0;
    *ret_names = NULL;
    *ret_error = NULL;
    char **names = calloc(nv + 1, sizeof(*names));
    local_bundle_volume *v = calloc(nm + 1, sizeof(*v));
    if (!names || !v) {
        free(names);
        free(v);
        return -ENOMEM;
    }
    int r = 0;
    for (size_t i = 0; i < nv && r == 0; i++) {
        const char *name = json_string_value(
            json_object_get(json_object_get(json_array_get(vcts, i), "metadata"), "name"));
        if (!path_is_clean_relative(name, false) || name[0] == '.') {
            char idx[24];
            snprintf(idx, sizeof(idx), "%zu", i);
            r = vol_fail(ret_error, "spec.volumeClaimTemplates[%s].metadata.name: invalid name \"%s\"",
                         idx, name ? name : "");
        } else if (!(names[i] = strdup(name)))
            r = -ENOMEM;
    }
    for (size_t i = 0; i < nm && r == 0; i++) {
        const json_t *m = json_array_get(mounts, i);
        const char *name = json_string_value(json_object_get(m, "name"));
        const char *path = json_string_value(json_object_get(m, "mountPath"));
        const char *sub = json_string_value(json_object_get(m, "subPath"));
        bool known = false;
        for (size_t j = 0; names[j] && name; j++)
            known |= strcmp(names[j], name) == 0;
        if (!known)
            continue;
        if (!path_is_clean_absolute(path)) {
            r = vol_fail(ret_error, "volumeMounts \"%s\": mountPath \"%s\" must be an absolute path "
                         "without . or .. components (and not /)", name, path ? path : "");
            break;
        }
        if (sub && *sub && !path_is_clean_relative(sub, true)) {
            r = vol_fail(ret_error, "volumeMounts \"%s\": subPath \"%s\" must be a relative path "
                         "without . or .. components", name, sub);
            break;
        }
        v[n].readonly = json_is_true(json_object_get(m, "readOnly"));
        v[n].mount_index = i;
        if (!(v[n].dest = strdup(path)) || !(v[n].claim = strdup(name)) ||
            (sub && *sub && !(v[n].sub_path = strdup(sub))) ||
            asprintf(&v[n].source, "%s/%s%s%s", volumes_dir, name, sub && *sub ? "/" : "",
                     sub && *sub ? sub : "") < 0) {
            v[n].source = NULL;
            n++;
            r = -ENOMEM;
            break;
        }
        n++;
    }
    if (r < 0) {
        local_bundle_volumes_free(v, n, names);
        return r;
    }
    *ret = v;
    *ret_n = n;
    *ret_names = names;
    return 0;
}

int local_bundle_main_argv(const json_t *ctr, json_t **ret, char **ret_error)
{
    const char *fields[] = {"command", "args"};
    *ret = NULL;
    *ret_error = NULL;
    json_t *argv = json_array();
    if (!argv)
        return -ENOMEM;
    for (size_t f = 0; f < ELEMENTSOF(fields); f++) {
        const json_t *a = json_object_get(ctr, fields[f]);
        size_t i;
        json_t *v;
        if (a && !json_is_array(a)) {
            json_decref(argv);
            if (asprintf(ret_error, "container %s must be a list of strings", fields[f]) < 0)
                *ret_error = NULL;
            return -EINVAL;
        }
        json_array_foreach(a, i, v) {
            if (!json_is_string(v)) {
                json_decref(argv);
                if (asprintf(ret_error, "container %s[%zu] must be a string", fields[f], i) < 0)
                    *ret_error = NULL;
                return -EINVAL;
            }
            json_array_append(argv, v);
        }
    }
    if (json_array_size(argv) == 0 ||
        !*json_string_value(json_array_get(argv, 0))) {
        bool empty = json_array_size(argv) > 0;
        json_decref(argv);
        if (empty) {
            if (asprintf(ret_error, "container command: the program name is empty") < 0)
                *ret_error = NULL;
            return -EINVAL;
        }
        return 0;
    }
    *ret = argv;
    return 0;
}
