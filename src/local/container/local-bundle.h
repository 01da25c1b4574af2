/* local/container: what a sandbox container is made of: the OCI bundle (local-bundle,
 * local-bundle-shared), its seccomp profile, user namespace ids (local-idmap, local-userns),
 * limits and the machine's capacity, TCP buffer budget (local-tcpmem), injected sandboxd
 * (local-inject) and images (local-image). Files and values; running them is runtime's.
 * Includes from other folders of src/local: runtime (spawning helpers), fs; never from a folder
 * above it (docs/architecture.md, "src/local in rooms"). */
/* OCI bundle generation for a local sandbox: config.json (runtime-spec 1.0, written with jansson)
 * with the secure defaults of docs/local-sandboxes.md, plus the generated /etc and the rootfs
 * skeleton of the `host` image. Pure file generation: no runc, no mounts on the host. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* config.json annotation naming the rootfs directory on the host (root.path may be a staging
 * path, see local-idmap.h). */
#define LOCAL_BUNDLE_ROOTFS_ANNOTATION "dev.asb.rootfs"
/* Where a sandbox with a socket_dir finds it (local_bundle_params). */
#define LOCAL_BUNDLE_SOCKET_DIR "/.asb/run"

/* A host directory bound read-write (or read-only) into the container: volumeClaimTemplates. */
typedef struct local_bundle_volume {
    char *dest;         /* absolute path in the container */
    char *source;       /* host directory */
    char *claim;        /* the volumeClaimTemplate's name */
    char *sub_path;     /* subPath inside the volume, NULL for the whole volume */
    size_t mount_index; /* index in the container's volumeMounts */
    bool readonly;
} local_bundle_volume;

typedef struct local_bundle_params {
    const char *bundle_dir;    /* created if missing; gets config.json, rootfs/ and etc/ */
    const char *rootfs;        /* NULL: the `host` image (bundle_dir/rootfs + host binds) */
    const char *hostname;      /* already cut to 63 characters */
    uid_t uid;                 /* sandbox user */
    gid_t gid;
    const char *workspace_dir; /* host dir bound read-write at /workspace */
    const char *home_dir;      /* host dir bound read-write at /home/sandbox */
    const char *tmp_dir;       /* host dir bound read-write at /tmp (the sandbox's limited
                                * scratch, local-scratch.h); NULL: a 1g tmpfs */
    const char *inject_bin;    /* host dir bound read-only at /.asb/bin */
    const char *inject_lib;    /* host dir bound read-only at /.asb/lib */
    const json_t *env;         /* container env: [{name, value}], borrowed, may be NULL */
    const json_t *image_env;   /* image config Env: ["K=V"], borrowed, may be NULL; the
                                * container env overrides it, it overrides the defaults */
    const char *working_dir;   /* absolute cwd of sandboxd and the main process; NULL =
                                * /workspace */
    int64_t memory_limit;      /* bytes, 0 = none */
    int64_t cpu_millis;        /* millicores, 0 = none */
    int64_t pids_limit;        /* > 0 */
    const char *cgroups_path;  /* e.g. "/asb/<uid>" */
    const local_bundle_volume *volumes; /* bound after /workspace and home, in order */
    size_t n_volumes;
    const json_t *main_argv; /* container command+args (JSON array of strings) or NULL; sets
                              * ASB_MAIN_OUTPUT_FD=5, ASB_MAIN_OUTPUT_KEEP_FD=6 (the output
                              * pipe's ends, oci_run_detached) */
    const char *main_dir;    /* with main_argv: host dir bound at /.asb/main (exit), inside the
                              * sandbox's own filesystem when it has one (local-scratch.h) */
    const char *netns_path;  /* network namespace to join (local-net.h), NULL: a new private
                              * one with loopback only */
    const char *nameserver;  /* resolver for /etc/resolv.conf, NULL: none */
    uint32_t userns_start;   /* with userns_size: a user namespace mapping ids 0..size-1 to
                              * host ids userns_start.. (uids and gids alike); mount points
                              * are made in the rootfs beforehand, as the container's root
                              * cannot create them in a rootfs owned by host root */
    uint32_t userns_size;    /* 0: no user namespace */
    bool gvisor;             /* the runtime is gVisor's runsc: its seccomp profile variant
                              * (local_seccomp_profile_for) */
    const char *socket_dir;  /* NULL: sandboxd serves the listening sockets it inherits as fds 3
                              * and 4 (oci_run_detached). Else a host directory bound
                              * read-write at /.asb/run, where sandboxd binds rest.sock and
                              * grpc.sock itself (runsc, which cannot pass fds: the host links
                              * them into run/<uid>, local-runtime-gvisor.h); the main
                              * process's output then goes to /.asb/main/log */
    const char *userns_path; /* with userns_size: the namespace to join (local-userns.h), whose
                              * maps are those above; NULL: runc creates it. With netns_path
                              * too, config.json names no network namespace: runc must run in
                              * netns_path itself (local_userns_netns_enter) */
    const char *shared_dir;  /* $ASB_STATE_DIR/shared (local-bundle-shared.h): the `host`
                              * rootfs skeleton, the /sys skeleton and constant /etc files are
                              * shared read-only there; NULL: the bundle holds its own */
} local_bundle_params;

/* The main process of a container: `command` followed by `args` (either may be absent), as a
 * new JSON array of strings, or NULL when there is none. -EINVAL (with *ret_error) when an
 * element is not a string. */
int local_bundle_main_argv(const json_t *container, json_t **ret, char **ret_error);

/* The volumes of a Sandbox: every volumeMount of its first container whose name is a
 * volumeClaimTemplate's metadata.name becomes a bind of <volumes_dir>/<name>[/<subPath>] at
 * mountPath. Mounts of other volumes are ignored (no local equivalent yet). Also returns the
 * template names (*ret_names, owned, NULL-terminated; names[i] is template i) so the caller
 * creates every directory. -EINVAL with *ret_error for a bad name (also one starting with '.',
 * which the volumes' own files use: local-volume.h), mountPath or subPath. */
int local_bundle_volumes(const json_t *sandbox, const char *volumes_dir,
                         local_bundle_volume **ret, size_t *ret_n, char ***ret_names,
                         char **ret_error);
void local_bundle_volumes_free(local_bundle_volume *v, size_t n, char **names);

/* Writes the bundle. On failure returns a negative errno and *ret_error (owned) says what. */
int local_bundle_write(const local_bundle_params *p, char **ret_error);
/* The same, and *ret_root (owned; may be NULL when not wanted) is the rootfs directory on the
 * host the bundle names: p->rootfs, the shared `host` skeleton, or bundle_dir/rootfs when the
 * skeleton lacks a mount point the sandbox needs (a volume's mountPath). */
int local_bundle_write_rooted(const local_bundle_params *p, char **ret_root, char **ret_error);
/* The same, with every bind mount's source in config.json replaced by
 * LOCAL_BUNDLE_STAGE_DIR/<i> and *ret_sources (owned: a JSON array of strings) holding the
 * real sources in that order: for a runtime whose mounts are made by a process in the sandbox's
 * user namespace (runsc's gofer), to which the state directory (0700) is closed. The caller
 * binds them there in the staging mount namespace (local_gvisor_stage_binds). */
int local_bundle_write_staged(const local_bundle_params *p, char **ret_root, json_t **ret_sources,
                              char **ret_error);
