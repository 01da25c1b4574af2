/* See local-cleanup.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/state-files.h"
#include "basic/strv.h"
#include "local/runtime/local-cleanup.h"
#include "local/fs/local-fs.h"
#include "local/runtime/local-runtime-oci.h"
#include "shared/log.h"

/* Names of the subdirectories of state_dir/area (sandbox uids). */
static void add_dir_names(strv *s, const char *state_dir, const char *area)
{
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/%s", state_dir, area) < 0)
        return;
    _cleanup_closedir_ DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.')
            (void)strv_add_unique(s, de->d_name);
}

/* Deletes every container of one runtime root; their ids join uids. */
static void cleanup_root(const char *binary, const char *root, strv *uids,
                         local_cleanup_report *rep)
{
    oci_runtime rt = {0};
    if (oci_runtime_init(&rt, binary, root) < 0) {
        oci_runtime_done(&rt);
        rep->left++;
        return;
    }
    json_t *list = NULL;
    if (oci_list(&rt, &list) == 0) {
        size_t i;
        json_t *c;
        json_array_foreach (list, i, c) {
            const char *id = json_string_value(json_object_get(c, "id"));
            const char *st = json_string_value(json_object_get(c, "status"));
            if (!id)
                continue;
            (void)strv_add_unique(uids, id);
            _cleanup_free_ char *err = NULL, *rerr = NULL;
            if (st && strcmp(st, "paused") == 0)
                oci_resume(&rt, id, &rerr); /* a frozen container cannot die */
            int k = oci_delete(&rt, id, &err);
            if (k < 0) {
                log_warn("cannot delete container", "root", root, "id", id, "error",
                         err ? err : strerror(-k));
                rep->left++;
            } else
                rep->containers++;
        }
    }
    json_decref(list);
    list = NULL;
    if (oci_list(&rt, &list) == 0 && json_array_size(list) > 0) {
        log_warn("containers are left in the runtime root", "root", root);
        rep->left++;
    }
    json_decref(list);
    oci_runtime_done(&rt);
}

/* Kills what is left in a cgroup directory and removes it. */
static int remove_cgroup(const char *dir)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY)
            return -errno;
        _cleanup_free_ char *procs = NULL;
        if (asprintf(&procs, "%s/cgroup.procs", dir) < 0)
            return -ENOMEM;
        _cleanup_fclose_ FILE *f = fopen(procs, "re");
        long pid;
        while (f && fscanf(f, "%ld", &pid) == 1)
            if (pid > 0)
                kill((pid_t)pid, SIGKILL);
        usleep(10000);
    }
    return -EBUSY;
}

int local_cleanup_sandbox_cgroups(const char *uid, unsigned *ret_removed)
{
    _cleanup_free_ char *pat1 = NULL, *pat2 = NULL;
    if (asprintf(&pat1, "/sys/fs/cgroup/*/asb/%s", uid) < 0 ||
        asprintf(&pat2, "/sys/fs/cgroup/asb/%s", uid) < 0)
        return -ENOMEM;
    glob_t g = {0};
    int gk = glob(pat1, GLOB_ONLYDIR | GLOB_NOSORT, NULL, &g);
    if (gk == 0 || gk == GLOB_NOMATCH)
        gk = glob(pat2, GLOB_ONLYDIR | GLOB_NOSORT | (gk == 0 ? GLOB_APPEND : 0), NULL, &g);
    int ret = 0;
    for (size_t j = 0; j < g.gl_pathc; j++) {
        int k = remove_cgroup(g.gl_pathv[j]);
        if (k < 0) {
            log_warn("cannot remove cgroup", "path", g.gl_pathv[j], "error", strerror(-k));
            ret = k;
        } else if (ret_removed)
            (*ret_removed)++;
    }
    globfree(&g);
    return ret;
}

void local_cleanup_cgroup_parents(void)
{
    glob_t g = {0};
    int gk = glob("/sys/fs/cgroup/*/asb", GLOB_ONLYDIR | GLOB_NOSORT, NULL, &g);
    if (gk == 0 || gk == GLOB_NOMATCH)
        (void)glob("/sys/fs/cgroup/asb", GLOB_ONLYDIR | GLOB_NOSORT | (gk == 0 ? GLOB_APPEND : 0),
                   NULL, &g);
    for (size_t j = 0; j < g.gl_pathc; j++)
        (void)rmdir(g.gl_pathv[j]); /* EBUSY while any sandbox (of any server) has a cgroup */
    globfree(&g);
}

static void cleanup_cgroups(const strv *uids, local_cleanup_report *rep)
{
    for (size_t i = 0; i < uids->n; i++)
        if (local_cleanup_sandbox_cgroups(uids->v[i], &rep->cgroups) < 0)
            rep->left++;
}

/* /proc/self/mountinfo escapes blanks and backslashes as \ooo. */
static void unescape_octal(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else
            *o++ = *s;
    }
    *o = '\0';
}

static int by_length_desc(const void *a, const void *b)
{
    size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
    return la < lb ? 1 : la > lb ? -1 : 0;
}

static bool under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

int local_cleanup_unmount_under(const char *dir, const char *fstype, unsigned *ret_count)
{
    strv m = STRV_INIT;
    _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
    char *line = NULL;
    size_t cap = 0;
    int r = 0;
    while (f && getline(&line, &cap, f) > 0) {
        char mp[4096], type[64];
        /* The filesystem type follows the " - " that ends the optional fields. */
        const char *sep = strstr(line, " - ");
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 || !sep ||
            sscanf(sep + 3, "%63s", type) != 1)
            continue;
        unescape_octal(mp);
        if (under(mp, dir) && (fstype || strcmp(mp, dir) != 0) &&
            (!fstype || strcmp(type, fstype) == 0))
            (void)strv_add_unique(&m, mp);
    }
    free(line);
    if (m.n)
        qsort(m.v, m.n, sizeof(char *), by_length_desc);
    for (size_t i = 0; i < m.n; i++) {
        if (umount2(m.v[i], UMOUNT_NOFOLLOW) == 0 ||
            (errno == EBUSY && umount2(m.v[i], UMOUNT_NOFOLLOW | MNT_DETACH) == 0)) {
            if (ret_count)
                (*ret_count)++;
        } else if (errno != EINVAL && errno != ENOENT) {
            log_warn("cannot unmount", "path", m.v[i], "error", strerror(errno));
            r = -errno;
        }
    }
    strv_done(&m);
    return r;
}

/* Every mount point under state_dir, deepest first. */
static void cleanup_mounts(const char *state_dir, local_cleanup_report *rep)
{
    if (local_cleanup_unmount_under(state_dir, NULL, &rep->mounts) < 0)
        rep->left++;
}

/* Loop devices whose backing file lies under state_dir are detached. */
static void cleanup_loops(const char *state_dir, local_cleanup_report *rep)
{
    glob_t g = {0};
    if (glob("/sys/block/loop*/loop/backing_file", GLOB_NOSORT, NULL, &g) != 0)
        return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        _cleanup_fclose_ FILE *f = fopen(g.gl_pathv[i], "re");
        char backing[4096];
        if (!f || !fgets(backing, sizeof(backing), f))
            continue;
        backing[strcspn(backing, "\n")] = '\0';
        if (!under(backing, state_dir))
            continue;
        /* /sys/block/loopN/loop/backing_file -> /dev/loopN */
        const char *name = g.gl_pathv[i] + strlen("/sys/block/");
        char dev[64];
        snprintf(dev, sizeof(dev), "/dev/%.*s", (int)strcspn(name, "/"), name);
        _cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && ioctl(fd, LOOP_CLR_FD, 0) == 0)
            rep->loops++;
        else {
            log_warn("cannot detach loop device", "device", dev, "error", strerror(errno));
            rep->left++;
        }
    }
    globfree(&g);
}

int local_cleanup(const char *state_dir, const char *runtime, const local_net_options *net,
                  local_cleanup_report *ret)
{
    local_cleanup_report rep = {0};
    strv uids = STRV_INIT;
    add_dir_names(&uids, state_dir, "sandboxes");
    add_dir_names(&uids, state_dir, "run");
    add_dir_names(&uids, state_dir, "net");
    /* The default root, then one per other runtime class handler (oci-NAME runs NAME). */
    _cleanup_free_ char *root = NULL;
    if (asprintf(&root, "%s/runc", state_dir) >= 0 && access(root, F_OK) == 0)
        cleanup_root(runtime, root, &uids, &rep);
    _cleanup_closedir_ DIR *d = opendir(state_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, "oci-", 4) != 0 || !de->d_name[4])
            continue;
        _cleanup_free_ char *r = NULL;
        if (asprintf(&r, "%s/%s", state_dir, de->d_name) >= 0)
            cleanup_root(de->d_name + 4, r, &uids, &rep);
    }
    cleanup_cgroups(&uids, &rep);
    local_cleanup_cgroup_parents();
    local_net_options no = *net;
    no.state_dir = state_dir;
    if (local_net_purge(&no) < 0) {
        log_warn("cannot remove all of the network (bridge, nft table, namespaces)");
        rep.left++;
    }
    cleanup_mounts(state_dir, &rep);
    cleanup_loops(state_dir, &rep);
    /* Sockets, names and network state of sandboxes that no longer run; what their bundles shared
     * (local-bundle-shared.h), made again by the next start. */
    const char *areas[] = {"run", SANDBOX_NAMES_DIR, "net", "shared"};
    for (size_t i = 0; i < ELEMENTSOF(areas); i++) {
        _cleanup_free_ char *p = NULL;
        if (asprintf(&p, "%s/%s", state_dir, areas[i]) >= 0)
            fs_rm_rf(p);
    }
    strv_done(&uids);
    if (ret)
        *ret = rep;
    return rep.left ? -EIO : 0;
}
