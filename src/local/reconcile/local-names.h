/* The state directory's names of Ready sandboxes (SANDBOX_NAMES_DIR, basic/state-files.h):
 * names/<namespace>/<name> -> ../../run/<uid>. The reconcile loop binds a name when it writes a
 * Sandbox's status as Ready and unbinds it before freezing the sandbox; a resync prunes links
 * whose run/<uid> is gone. Only the reconcile loop's thread writes them. */
#pragma once

/* Points ns/name at uid (atomically replacing a link to an older uid of that name). Returns 0 or
 * a negative errno; names that are not DNS-1123 (they always are, by the API's validation) are
 * refused with -EINVAL. */
int local_names_bind(const char *state_dir, const char *ns, const char *name, const char *uid);

/* Removes ns/name when it points at uid (not when a newer Sandbox of the name has it). */
void local_names_unbind(const char *state_dir, const char *ns, const char *name, const char *uid);

/* Removes links whose run/<uid> is gone, and namespace directories left empty. */
void local_names_prune(const char *state_dir);
