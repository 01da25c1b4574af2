/* OCI image layouts unpacked with umoci. See local-image.h. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "local/fs/local-fs.h"
#include "local/container/local-image.h"
#include "local/runtime/local-runtime-oci.h"

#define REF_NAME "org.opencontainers.image.ref.name"

static int failf(const char **ret_reason, char **ret_message, const char *reason, int err,
                 const char *fmt, ...) _printf_(5, 6);
static int failf(const char **ret_reason, char **ret_message, const char *reason, int err,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    *ret_reason = reason;
    if (vasprintf(ret_message, fmt, ap) < 0)
        *ret_message = NULL;
    va_end(ap);
    return err < 0 ? err : -EINVAL;
}

/* "sha256:<hex>" -> "sha256-<hex>", or NULL when the digest is not plain [a-z0-9]+:[a-f0-9]+. */
static char *digest_dirname(const char *digest)
{
    const char *colon = digest ? strchr(digest, ':') : NULL;
    if (!colon || colon == digest || !colon[1])
        return NULL;
    for (const char *c = digest; c < colon; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
            return NULL;
    for (const char *c = colon + 1; *c; c++)
        if (!((*c >= 'a' && *c <= 'f') || (*c >= '0' && *c <= '9')))
            return NULL;
    char *s = strdup(digest);
    if (s)
        s[colon - digest] = '-';
    return s;
}

/* The process object of the runtime config umoci generated from the image config: env (Env),
 * cwd (WorkingDir) and user (User, resolved through the image's /etc/passwd by umoci). */
static void image_env(const char *dir, json_t **ret_process)
{
    if (!ret_process)
        return;
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/config.json", dir) < 0)
        return;
    json_t *cfg = json_load_file(path, 0, NULL);
    json_t *process = json_object_get(cfg, "process");
    if (json_is_object(process))
        *ret_process = json_incref(process);
    json_decref(cfg);
}

/* Over ~100 lines on purpose: one linear path (reference -> index.json -> manifest digest ->
 * umoci unpack into a temporary tree -> the tag checked again -> rename), each step failing with
 * its own reason and message for the Sandbox's status; the steps share the paths they build. */
int local_image_oci(const char *state_dir, const char *ref, char **ret_rootfs, json_t **ret_env,
                    const char **ret_reason, char **ret_message)
{
    static atomic_uint counter;
    *ret_rootfs = NULL;
    *ret_message = NULL;
    if (ret_env)
        *ret_env = NULL;
    const char *NF = "ImageNotFound", *UF = "ImageUnpackFailed";
    if (!ref || ref[0] != '/')
        return failf(ret_reason, ret_message, NF, -EINVAL,
                     "image \"oci:%s\": oci: needs an absolute path to an OCI image layout",
                     ref ? ref : "");

    /* The tag follows the last ':' after the last '/'. */
    _cleanup_free_ char *layout = strdup(ref);
    if (!layout)
        return -ENOMEM;
    const char *tag = "latest";
    char *slash = strrchr(layout, '/'), *colon = strrchr(layout, ':');
    if (colon && colon > slash) {
        *colon = '\0';
        tag = colon + 1;
    }
    if (!tag[0])
        return failf(ret_reason, ret_message, NF, -EINVAL, "image \"oci:%s\": empty tag", ref);

    _cleanup_free_ char *index_path = NULL;
    if (asprintf(&index_path, "%s/index.json", layout) < 0)
        return -ENOMEM;
    json_error_t jerr;
    json_t *index = json_load_file(index_path, 0, &jerr);
    if (!index) {
        struct stat st;
        if (stat(layout, &st) < 0 || !S_ISDIR(st.st_mode))
            return failf(ret_reason, ret_message, NF, -ENOENT,
                         "image \"oci:%s\": %s is not a directory (no OCI image layout there)", ref,
                         layout);
        return failf(ret_reason, ret_message, NF, -ENOENT,
                     "image \"oci:%s\": %s is not an OCI image layout: cannot read index.json: %s",
                     ref, layout, jerr.text);
    }
    const char *digest = NULL;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(index, "manifests"), i, m) {
        const char *name =
            json_string_value(json_object_get(json_object_get(m, "annotations"), REF_NAME));
        if (name && strcmp(name, tag) == 0)
            digest = json_string_value(json_object_get(m, "digest"));
    }
    _cleanup_free_ char *dname = digest_dirname(digest),
                        *digest_copy = digest ? strdup(digest) : NULL;
    json_decref(index);
    if (!digest)
        return failf(ret_reason, ret_message, NF, -ENOENT,
                     "image \"oci:%s\": tag \"%s\" not found in the OCI image layout %s", ref, tag,
                     layout);
    if (!digest_copy)
        return -ENOMEM;
    if (!dname)
        return failf(ret_reason, ret_message, NF, -EINVAL,
                     "image \"oci:%s\": tag \"%s\" has an invalid manifest digest", ref, tag);

    _cleanup_free_ char *images = NULL, *final = NULL, *rootfs = NULL, *tmp = NULL,
                        *image_arg = NULL;
    if (asprintf(&images, "%s/images", state_dir) < 0 ||
        asprintf(&final, "%s/%s", images, dname) < 0 || asprintf(&rootfs, "%s/rootfs", final) < 0)
        return -ENOMEM;
    struct stat st;
    if (stat(rootfs, &st) == 0 && S_ISDIR(st.st_mode)) {
        (void)utimensat(AT_FDCWD, final, NULL, 0); /* last use, for local_image_gc */
        image_env(final, ret_env);
        *ret_rootfs = TAKE_PTR(rootfs);
        return 0; /* already unpacked */
    }
    int k = mkdir_p(images, 0700);
    if (k < 0)
        return failf(ret_reason, ret_message, UF, k, "image \"oci:%s\": cannot create %s: %s", ref,
                     images, strerror(-k));
    if (asprintf(&tmp, "%s/.tmp-%s-%ld-%u", images, dname, (long)getpid(),
                 atomic_fetch_add(&counter, 1)) < 0 ||
        asprintf(&image_arg, "%s:%s", layout, tag) < 0)
        return -ENOMEM;
    fs_rm_rf(tmp);
    char *argv[] = {"umoci", "unpack", "--image", image_arg, tmp, NULL};
    _cleanup_free_ char *out = NULL;
    k = local_spawn_capture(argv, &out);
    if (k != 0) {
        fs_rm_rf(tmp);
        if (out) {
            size_t n = strlen(out);
            while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
                out[--n] = '\0';
        }
        if (k < 0)
            return failf(ret_reason, ret_message, UF, k, "image \"oci:%s\": cannot run umoci: %s",
                         ref, strerror(-k));
        return failf(ret_reason, ret_message, UF, -EIO,
                     "image \"oci:%s\": umoci unpack failed (exit %d): %s", ref, k,
                     out && out[0] ? out : "no output");
    }
    /* The tag could have moved between our index.json read and umoci's: keep the tree only if
     * umoci unpacked the manifest we resolved (umoci.json's descriptor walk starts there). */
    _cleanup_free_ char *meta_path = NULL;
    if (asprintf(&meta_path, "%s/umoci.json", tmp) < 0) {
        fs_rm_rf(tmp);
        return -ENOMEM;
    }
    json_t *meta = json_load_file(meta_path, 0, NULL);
    const char *got = json_string_value(json_object_get(
        json_array_get(
            json_object_get(json_object_get(meta, "from_descriptor_path"), "descriptor_walk"), 0),
        "digest"));
    bool same = got && strcmp(got, digest_copy) == 0;
    json_decref(meta);
    if (!same) {
        fs_rm_rf(tmp);
        return failf(ret_reason, ret_message, UF, -EAGAIN,
                     "image \"oci:%s\": tag \"%s\" changed while it was unpacked; retrying at "
                     "the next resync",
                     ref, tag);
    }
    if (rename(tmp, final) < 0) {
        k = -errno;
        fs_rm_rf(tmp);
        /* Somebody else unpacked the same digest first: use theirs. */
        if (!(stat(rootfs, &st) == 0 && S_ISDIR(st.st_mode)))
            return failf(ret_reason, ret_message, UF, k, "image \"oci:%s\": cannot rename %s: %s",
                         ref, tmp, strerror(-k));
    }
    image_env(final, ret_env);
    *ret_rootfs = TAKE_PTR(rootfs);
    return 0;
}

int local_image_gc(const char *state_dir, char *const *in_use, size_t n_in_use, usec_t min_idle)
{
    _cleanup_free_ char *images = NULL;
    if (asprintf(&images, "%s/images", state_dir) < 0)
        return -ENOMEM;
    DIR *d = opendir(images);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    usec_t now = now_usec(CLOCK_REALTIME);
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' && (!de->d_name[1] || strcmp(de->d_name, "..") == 0))
            continue;
        bool tmp = strncmp(de->d_name, ".tmp-", 5) == 0;
        _cleanup_free_ char *dir = NULL, *rootfs = NULL;
        if (asprintf(&dir, "%s/%s", images, de->d_name) < 0 ||
            asprintf(&rootfs, "%s/rootfs", dir) < 0)
            break;
        bool used = false;
        for (size_t i = 0; i < n_in_use && !used; i++)
            used = in_use[i] && strcmp(in_use[i], rootfs) == 0;
        struct stat st;
        if (used || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        usec_t mtime = (usec_t)st.st_mtim.tv_sec * USEC_PER_SEC +
                       (usec_t)st.st_mtim.tv_nsec / 1000;
        usec_t idle = tmp ? 3600 * USEC_PER_SEC : min_idle;
        if (mtime + idle > now)
            continue;
        if (fs_rm_rf(dir) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
