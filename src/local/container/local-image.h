/* OCI image layouts for local sandboxes: `oci:/abs/layout[:tag]` is resolved through the
 * layout's index.json to a manifest digest and unpacked once per digest with umoci into
 * $ASB_STATE_DIR/images/<algo>-<hex>/ (rootfs/ + umoci's config.json). Unpacking goes to a
 * temporary directory renamed into place, so a failure leaves nothing and concurrent users
 * of one image share the same tree. */
#pragma once

#include <jansson.h>

#include "basic/time-util.h"

/* ref is what follows "oci:". On success *ret_rootfs (owned) is the unpacked rootfs and
 * *ret_env (owned, may be NULL when ret_env is NULL or unknown) the OCI runtime `process`
 * object umoci derived from the image config: `env` (["K=V"], from Env), `cwd` (WorkingDir,
 * "/" when unset) and `user` ({uid, gid}, from User). On
 * failure returns a negative errno with *ret_reason (static: ImageNotFound,
 * ImageUnpackFailed) and *ret_message (owned). */
int local_image_oci(const char *state_dir, const char *ref, char **ret_rootfs, json_t **ret_env,
                    const char **ret_reason, char **ret_message);

/* Removes unpacked images under $ASB_STATE_DIR/images that no running container uses (in_use:
 * rootfs paths of running containers) and that were last used more than min_idle ago, plus
 * leftover temporary unpack dirs older than an hour. Returns the number removed. */
int local_image_gc(const char *state_dir, char *const *in_use, size_t n_in_use, usec_t min_idle);
