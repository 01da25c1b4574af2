/* OCI image layouts for local sandboxes: `oci:/abs/layout[:tag]` is resolved through the
 * layout's index.json to a manifest digest and unpacked once per digest with umoci into
 * $ASB_STATE_DIR/images/<algo>-<hex>/ (rootfs/ + umoci's config.json). Unpacking goes to a
 * temporary directory renamed into place, so a failure leaves nothing and concurrent users
 * of one image share the same tree. */
#pragma once

/* ref is what follows "oci:". On success *ret_rootfs (owned) is the unpacked rootfs. On
 * failure returns a negative errno with *ret_reason (static: ImageNotFound,
 * ImageUnpackFailed) and *ret_message (owned). */
int local_image_oci(const char *state_dir, const char *ref, char **ret_rootfs,
                    const char **ret_reason, char **ret_message);
