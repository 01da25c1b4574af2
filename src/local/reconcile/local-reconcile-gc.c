/* What a resync of the reconcile loop collects on the host: unpacked images nothing uses, the
 * run/, sandboxes/ and volumes/ directories of Sandboxes that are gone, and their user namespace
 * slots. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "local/container/local-bundle.h"
#include "local/fs/local-fs.h"
#include "local/container/local-image.h"
#include "local/reconcile/local-names.h"
#include "local/reconcile/local-reconcile-internal.h"
#include "local/storage/local-scratch.h"
#include "local/snapshot/local-snapshot-overlay.h"
#include "local/storage/local-volume.h"
#include "shared/log.h"

static void remove_orphan_dirs(local_reconciler *r, const char *area, const json_t *items)
{
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/%s", r->state_dir, area) < 0)
        return;
    _cleanup_closedir_ DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        bool known = false;
        size_t i;
        json_t *sb;
        json_array_foreach (items, i, sb) {
            const char *uid = api_meta_string(sb, "uid");
            known |= uid && strcmp(uid, de->d_name) == 0;
        }
        if (!known && !rec_teardown_pending(r, de->d_name) && !rec_start_pending(r, de->d_name)) {
            _cleanup_free_ char *p = NULL;
            if (asprintf(&p, "%s/%s", dir, de->d_name) < 0)
                continue;
            local_snapshot_overlays_release(p); /* a fork's overlays: rm stops at mounts */
            if (strcmp(area, "sandboxes") == 0)
                local_scratch_release(p); /* its filesystem first: rm stops at mounts */
            if (strcmp(area, "volumes") == 0)
                local_volumes_release(p);
            if (strcmp(area, "run") == 0) {
                _cleanup_free_ char *stage = strdup_printf("%s/volumes", p);
                if (stage)
                    local_volumes_unstage(stage);
            }
            fs_rm_rf(p);
        }
    }
}

void rec_gc_images(local_reconciler *r)
{
    char **in_use = calloc(r->n_entries + 1, sizeof(char *));
    if (!in_use)
        return;
    for (size_t i = 0; i < r->n_entries; i++) {
        _cleanup_free_ char *cfg = NULL;
        if (asprintf(&cfg, "%s/sandboxes/%s/bundle/config.json", r->state_dir, r->entries[i].uid) <
            0)
            continue;
        json_t *c = json_load_file(cfg, 0, NULL);
        const char *root = json_string_value(
            json_object_get(json_object_get(c, "annotations"), LOCAL_BUNDLE_ROOTFS_ANNOTATION));
        if (!root)
            root = json_string_value(json_object_get(json_object_get(c, "root"), "path"));
        in_use[i] = root ? strdup(root) : NULL;
        json_decref(c);
    }
    int n = local_image_gc(r->state_dir, in_use, r->n_entries, r->image_gc_idle);
    if (n > 0) {
        char count[16];
        snprintf(count, sizeof(count), "%d", n);
        log_info("removed unused images", "count", count);
    }
    for (size_t i = 0; i < r->n_entries; i++)
        free(in_use[i]);
    free(in_use);
}

typedef struct idmap_keep_ctx {
    local_reconciler *r;
    const json_t *items;
} idmap_keep_ctx;

/* A user namespace slot stays while its Sandbox exists or a runtime still has its container. */
static bool idmap_keep(const char *uid, void *payload)
{
    idmap_keep_ctx *c = payload;
    size_t i;
    json_t *sb;
    json_array_foreach (c->items, i, sb) {
        const char *u = api_meta_string(sb, "uid");
        if (u && strcmp(u, uid) == 0)
            return true;
    }
    for (size_t h = 0; h < rec_n_handlers(c->r); h++) {
        _cleanup_free_ char *p = NULL;
        if (asprintf(&p, "%s/%s", rec_handler(c->r, h)->root, uid) < 0 || access(p, F_OK) == 0)
            return true;
    }
    return false;
}

void rec_gc_orphans(local_reconciler *r, const json_t *items)
{
    remove_orphan_dirs(r, "run", items);
    remove_orphan_dirs(r, "sandboxes", items);
    remove_orphan_dirs(r, "volumes", items);
    local_names_prune(r->state_dir); /* names whose run/<uid> went above */
    local_idmap_gc(r->idmap, idmap_keep, &(idmap_keep_ctx){r, items});
}
