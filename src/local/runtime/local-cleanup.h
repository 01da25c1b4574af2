/* `asb serve --cleanup` (docs/operations.md): removes from the host everything one state
 * directory ever made there, whatever the store says: the containers in each of its OCI
 * runtime roots, their cgroups, the sandboxes' network namespaces, the bridge and the nft
 * table, and every mount and loop device under the directory. Files in the directory (the
 * store, workspaces, volumes) stay: remove the directory to forget them. Run it with asb serve
 * stopped. */
#pragma once

#include "local/net/local-net.h"

typedef struct local_cleanup_report {
    unsigned containers, cgroups, mounts, loops;
    unsigned left; /* things that could not be removed (each logged) */
} local_cleanup_report;

/* runtime: the binary of the default root ($state_dir/runc); other roots ($state_dir/oci-NAME)
 * use NAME. net->state_dir is set from state_dir. 0, or -EIO when something is left. */
int local_cleanup(const char *state_dir, const char *runtime, const local_net_options *net,
                  local_cleanup_report *ret);

/* Unmounts every mount point below dir (and dir itself when fstype is given) whose filesystem
 * type is fstype (NULL: any), deepest first; a busy one lazily. *ret_count (may be NULL) is
 * incremented per mount removed. 0, or the last negative errno of a mount left (logged). */
int local_cleanup_unmount_under(const char *dir, const char *fstype, unsigned *ret_count);

/* The cgroups of sandbox `uid` in every hierarchy (/sys/fs/cgroup/<h>/asb/<uid>): what is left in
 * them is killed and the directories removed. runc delete removes them itself, but gives up on a
 * cgroup whose last processes are still dying (a loaded machine, a just-thawed container).
 * *ret_removed (may be NULL) is incremented per directory removed. 0, or a negative errno when
 * one could not be removed (logged). */
int local_cleanup_sandbox_cgroups(const char *uid, unsigned *ret_removed);

/* The parents runc made for them (/sys/fs/cgroup/<h>/asb), removed where empty: at a clean stop
 * and by --cleanup, never while this server starts containers. */
void local_cleanup_cgroup_parents(void);
