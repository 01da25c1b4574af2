/* volumeClaimTemplates -> host directory binds in the bundle. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "local/container/local-bundle.h"
#include "local/fs/local-fs.h"
#include "local/storage/local-volume.h"
#include "unit.h"

static json_t *sb(const char *vcts_json, const char *mounts_json)
{
    json_t *o = json_pack("{s:{s:{s:{s:[{s:s, s:s}]}}}}", "spec", "podTemplate", "spec",
                          "containers", "name", "main", "image", "host");
    json_t *spec = json_object_get(o, "spec");
    if (vcts_json)
        json_object_set_new(spec, "volumeClaimTemplates", json_loads(vcts_json, 0, NULL));
    if (mounts_json)
        json_object_set_new(
            json_array_get(
                json_object_get(json_object_get(json_object_get(spec, "podTemplate"), "spec"),
                                "containers"),
                0),
            "volumeMounts", json_loads(mounts_json, 0, NULL));
    return o;
}

TEST(no_templates_no_volumes)
{
    local_bundle_volume *v;
    size_t n;
    char **names, *err;
    json_t *o = sb(NULL, "[{\"name\":\"cache\",\"mountPath\":\"/cache\"}]");
    CHECK_INT_EQ(local_bundle_volumes(o, "/s/volumes/u", &v, &n, &names, &err), 0);
    CHECK_INT_EQ(n, 0);
    CHECK(names && !names[0]);
    local_bundle_volumes_free(v, n, names);
    json_decref(o);
}

TEST(templates_map_to_dirs)
{
    local_bundle_volume *v;
    size_t n;
    char **names, *err;
    json_t *o = sb("[{\"metadata\":{\"name\":\"data\"}},{\"metadata\":{\"name\":\"unused\"}}]",
                   "[{\"name\":\"data\",\"mountPath\":\"/data\"},"
                   "{\"name\":\"other\",\"mountPath\":\"/other\"},"
                   "{\"name\":\"data\",\"mountPath\":\"/workspace/sub\",\"subPath\":\"a/b\","
                   "\"readOnly\":true}]");
    CHECK_INT_EQ(local_bundle_volumes(o, "/s/volumes/u", &v, &n, &names, &err), 0);
    CHECK_INT_EQ(n, 2);
    CHECK(strcmp(v[0].dest, "/data") == 0 && strcmp(v[0].source, "/s/volumes/u/data") == 0);
    CHECK(!v[0].readonly);
    CHECK(strcmp(v[1].dest, "/workspace/sub") == 0);
    CHECK(strcmp(v[1].source, "/s/volumes/u/data/a/b") == 0 && v[1].readonly);
    /* What a refused mount's message names: the template, the subPath, the mount's index. */
    CHECK(strcmp(v[0].claim, "data") == 0 && !v[0].sub_path && v[0].mount_index == 0);
    CHECK(strcmp(v[1].claim, "data") == 0 && strcmp(v[1].sub_path, "a/b") == 0 &&
          v[1].mount_index == 2);
    CHECK(names[0] && strcmp(names[0], "data") == 0 && strcmp(names[1], "unused") == 0);
    CHECK(!names[2]);
    local_bundle_volumes_free(v, n, names);
    json_decref(o);
}

static void bad(const char *vcts, const char *mounts, const char *needle)
{
    local_bundle_volume *v = NULL;
    size_t n = 0;
    char **names = NULL, *err = NULL;
    json_t *o = sb(vcts, mounts);
    CHECK_INT_EQ(local_bundle_volumes(o, "/s/v/u", &v, &n, &names, &err), -EINVAL);
    CHECK(err && strstr(err, needle));
    if (err && !strstr(err, needle))
        printf("#   got: %s\n", err);
    CHECK(!v && !names);
    free(err);
    json_decref(o);
}

TEST(bad_input_is_rejected)
{
    const char *d = "[{\"metadata\":{\"name\":\"data\"}}]";
    bad("[{\"metadata\":{\"name\":\"../x\"}}]", NULL, "volumeClaimTemplates[0].metadata.name");
    bad("[{\"metadata\":{}}]", NULL, "invalid name");
    bad("[{\"metadata\":{\"name\":\"..\"}}]", NULL, "invalid name");
    /* Names starting with '.' are the volumes' own files (local-volume.h). */
    bad("[{\"metadata\":{\"name\":\".disk-x\"}}]", NULL, "invalid name");
    bad(d, "[{\"name\":\"data\",\"mountPath\":\"rel\"}]", "mountPath \"rel\"");
    bad(d, "[{\"name\":\"data\",\"mountPath\":\"/\"}]", "mountPath \"/\"");
    bad(d, "[{\"name\":\"data\",\"mountPath\":\"/a/../etc\"}]", "mountPath");
    bad(d, "[{\"name\":\"data\"}]", "mountPath");
    bad(d, "[{\"name\":\"data\",\"mountPath\":\"/d\",\"subPath\":\"../../x\"}]", "subPath");
    bad(d, "[{\"name\":\"data\",\"mountPath\":\"/d\",\"subPath\":\"/abs\"}]", "subPath");
}

TEST(bundle_binds_volumes_after_workspace)
{
    char tmpl[] = "/tmp/asb-vol-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    char bundle[256], config[300];
    snprintf(bundle, sizeof(bundle), "%s/bundle", dir);
    snprintf(config, sizeof(config), "%s/config.json", bundle);
    local_bundle_volume vols[] = {
        {.dest = (char *)"/workspace/data", .source = (char *)"/s/volumes/u/data"},
        {.dest = (char *)"/ro", .source = (char *)"/s/volumes/u/ro", .readonly = true}};
    local_bundle_params p = {
        .bundle_dir = bundle,
        .hostname = "v",
        .uid = 1000,
        .gid = 1000,
        .workspace_dir = "/nonexistent/ws",
        .home_dir = "/nonexistent/home",
        .inject_bin = "/nonexistent/bin",
        .inject_lib = "/nonexistent/lib",
        .pids_limit = 10,
        .cgroups_path = "/asb/test",
        .volumes = vols,
        .n_volumes = 2,
    };
    char *err = NULL;
    CHECK_INT_EQ(local_bundle_write(&p, &err), 0);
    json_t *cfg = json_load_file(config, 0, NULL);
    CHECK(cfg != NULL);
    ssize_t ws = -1, data = -1, ro = -1;
    size_t i;
    json_t *m;
    json_array_foreach (json_object_get(cfg, "mounts"), i, m) {
        const char *d = json_string_value(json_object_get(m, "destination"));
        const char *src = json_string_value(json_object_get(m, "source"));
        char opts[256] = "";
        size_t j;
        json_t *o;
        json_array_foreach (json_object_get(m, "options"), j, o) {
            strncat(opts, json_string_value(o), sizeof(opts) - strlen(opts) - 2);
            strcat(opts, ",");
        }
        if (strcmp(d, "/workspace") == 0)
            ws = (ssize_t)i;
        if (strcmp(d, "/workspace/data") == 0) {
            data = (ssize_t)i;
            CHECK(strcmp(src, "/s/volumes/u/data") == 0 && strstr(opts, "rw,"));
            CHECK(strstr(opts, "nosuid,") && strstr(opts, "nodev,"));
        }
        if (strcmp(d, "/ro") == 0) {
            ro = (ssize_t)i;
            CHECK(strstr(opts, "ro,") != NULL);
        }
    }
    CHECK(ws >= 0 && data > ws && ro > data);
    json_decref(cfg);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK_INT_EQ(system(cmd), 0);
}

TEST(storage_request_is_the_size)
{
    json_t *o = sb("[{\"metadata\":{\"name\":\"a\"},\"spec\":{\"resources\":{\"requests\":"
                   "{\"storage\":\"16Mi\"}}}},{\"metadata\":{\"name\":\"b\"}},"
                   "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"resources\":{\"requests\":"
                   "{\"storage\":\"lots\"}}}},"
                   "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"resources\":{\"requests\":"
                   "{\"storage\":5}}}},{\"metadata\":{\"name\":\"e\"},\"spec\":{\"resources\":"
                   "{\"requests\":{\"storage\":[]}}}}]",
                   NULL);
    int64_t bytes = -1;
    CHECK_INT_EQ(local_volume_request(o, 0, &bytes), 0);
    CHECK_INT_EQ(bytes, 16 << 20);
    CHECK_INT_EQ(local_volume_request(o, 1, &bytes), 0); /* none: a plain directory */
    CHECK_INT_EQ(bytes, 0);
    CHECK_INT_EQ(local_volume_request(o, 2, &bytes), -EINVAL);
    CHECK_INT_EQ(local_volume_request(o, 3, &bytes), 0); /* a number is a quantity too */
    CHECK_INT_EQ(bytes, 5);
    CHECK_INT_EQ(local_volume_request(o, 4, &bytes), -EINVAL);
    json_decref(o);
}

static bool same_dir(const char *a, const char *b)
{
    struct stat sa, sb_;
    return stat(a, &sa) == 0 && stat(b, &sb_) == 0 && sa.st_ino == sb_.st_ino &&
           sa.st_dev == sb_.st_dev;
}

static bool is_mount(const char *p)
{
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s/..", p);
    struct stat a, b;
    struct statx xa, xb;
    return stat(p, &a) == 0 && stat(parent, &b) == 0 &&
           statx(AT_FDCWD, p, 0, STATX_MNT_ID, &xa) == 0 &&
           statx(AT_FDCWD, parent, 0, STATX_MNT_ID, &xb) == 0 && xa.stx_mnt_id != xb.stx_mnt_id;
}

/* Staging: the directory held is what gets bound; a link on the way refuses the mount and
 * leaves nothing mounted. Needs root (mount). */
TEST(stage_binds_the_directory_and_refuses_links)
{
    if (geteuid() != 0) {
        printf("# skipped: needs root\n");
        return;
    }
    char tmpl[] = "/tmp/test-local-volumes-XXXXXX", vols[128], stage[128], outside[128],
         p[PATH_MAX];
    char *top = mkdtemp(tmpl);
    CHECK(top != NULL);
    snprintf(vols, sizeof(vols), "%s/volumes", top);
    snprintf(stage, sizeof(stage), "%s/run/volumes", top);
    snprintf(outside, sizeof(outside), "%s/outside", top);
    CHECK_INT_EQ(mkdir(outside, 0700), 0);
    char *err = NULL;
    CHECK_INT_EQ(local_volume_prepare("/nonexistent", vols, "v", 0, 1000, 1000, &err), 0);
    CHECK(!err);
    local_bundle_volume v[] = {
        {.dest = (char *)"/v", .source = NULL, .claim = (char *)"v"},
        {.dest = (char *)"/c", .claim = (char *)"v", .sub_path = (char *)"a/b"}};
    local_volumes_staged st;
    size_t bad = 9;
    CHECK_INT_EQ(local_volumes_stage(vols, stage, v, 2, 1000, 1000, &st, &bad), 0);
    snprintf(p, sizeof(p), "%s/v/a/b", vols);
    struct stat sb_;
    CHECK(stat(p, &sb_) == 0 && sb_.st_uid == 1000 && (sb_.st_mode & 07777) == 0755);
    CHECK(v[1].source && same_dir(v[1].source, p) && is_mount(v[1].source));
    snprintf(p, sizeof(p), "%s/v", vols);
    CHECK(v[0].source && same_dir(v[0].source, p) && is_mount(v[0].source));
    local_volumes_stage_done(&st);
    CHECK(access(stage, F_OK) < 0);
    free(v[0].source);
    free(v[1].source);
    v[0].source = v[1].source = NULL;
    /* The sandbox swaps a/ for a link to a host directory. */
    char a[256], moved[256];
    snprintf(a, sizeof(a), "%s/v/a", vols);
    snprintf(moved, sizeof(moved), "%s/v/a.old", vols);
    CHECK_INT_EQ(rename(a, moved), 0);
    CHECK_INT_EQ(symlink(outside, a), 0);
    CHECK_INT_EQ(local_volumes_stage(vols, stage, v, 2, 1000, 1000, &st, &bad), -ELOOP);
    CHECK_INT_EQ(bad, 1);
    CHECK(!v[1].source);
    CHECK(access(stage, F_OK) < 0); /* the first bind was undone too */
    snprintf(p, sizeof(p), "%s/b", outside);
    CHECK(access(p, F_OK) < 0);
    CHECK(stat(outside, &sb_) == 0 && sb_.st_uid == 0 && (sb_.st_mode & 07777) == 0700);
    local_volumes_stage_done(&st);
    free(v[0].source);
    CHECK_INT_EQ(fs_rm_rf(top), 0);
}
