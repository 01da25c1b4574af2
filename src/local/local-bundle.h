/* OCI bundle generation for a local sandbox: config.json (runtime-spec 1.0, written with jansson)
 * with the secure defaults of docs/local-sandboxes.md, plus the generated /etc and the rootfs
 * skeleton of the `host` image. Pure file generation: no runc, no mounts on the host. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct local_bundle_params {
    const char *bundle_dir;    /* created if missing; gets config.json, rootfs/ and etc/ */
    const char *rootfs;        /* NULL: the `host` image (bundle_dir/rootfs + host binds) */
    const char *hostname;      /* already cut to 63 characters */
    uid_t uid;                 /* sandbox user */
    gid_t gid;
    const char *workspace_dir; /* host dir bound read-write at /workspace */
    const char *home_dir;      /* host dir bound read-write at /home/sandbox */
    const char *inject_bin;    /* host dir bound read-only at /.asb/bin */
    const char *inject_lib;    /* host dir bound read-only at /.asb/lib */
    const json_t *env;         /* container env: [{name, value}], borrowed, may be NULL */
    int64_t memory_limit;      /* bytes, 0 = none */
    int64_t cpu_millis;        /* millicores, 0 = none */
    int64_t pids_limit;        /* > 0 */
    const char *cgroups_path;  /* e.g. "/asb/<uid>" */
} local_bundle_params;

/* Writes the bundle. On failure returns a negative errno and *ret_error (owned) says what. */
int local_bundle_write(const local_bundle_params *p, char **ret_error);

/* Parses a Kubernetes quantity ("512Mi", "1G", "500m", "2") into *ret: bytes for memory,
 * millis when `millis` is set (cpu). -EINVAL on anything else. */
int local_parse_quantity(const char *s, bool millis, int64_t *ret);
