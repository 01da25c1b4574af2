/* The seccomp profile of a local sandbox: an allowlist in the spirit of the container runtimes'
 * default profiles (Docker/containerd), kept as data in local-seccomp.c with a comment per group
 * of system calls. Every syscall not named there fails with EPERM. docs/security.md ("Seccomp")
 * lists the groups and what each refusal stops.
 *
 * The same profile goes into config.json for every runtime handler (runc, crun, runsc with
 * --oci-seccomp, kata inside its guest). Names the installed libseccomp does not know (a syscall
 * newer than it, or one that does not exist on the architecture) are skipped by runc, so the
 * table names the x86_64 and the aarch64 calls side by side. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* One comparison on a syscall argument, as in the OCI runtime spec (op "SCMP_CMP_EQ", ...). For
 * SCMP_CMP_MASKED_EQ, `value` is the mask and `value_two` the value the masked argument must
 * equal. */
typedef struct local_seccomp_arg {
    unsigned index;
    uint64_t value;
    uint64_t value_two;
    const char *op;
} local_seccomp_arg;

/* One rule: `names` (NULL-terminated) get `errno_ret` (0 = allowed) when every argument
 * comparison holds (a rule without comparisons always applies). Comparisons must be on distinct
 * arguments: runc turns several comparisons on one argument into alternatives, so the table
 * spells alternatives as separate rules instead. */
typedef struct local_seccomp_rule {
    const char *group; /* short name, for tests and docs */
    const char *const *names;
    int errno_ret;
    local_seccomp_arg args[3];
    unsigned n_args;
} local_seccomp_rule;

/* The table, in order: unconditional allowlist groups, conditional rules, explicit refusals.
 * Borrowed, static. */
const local_seccomp_rule *local_seccomp_rules(size_t *ret_n);

/* Whether `name` is allowed unconditionally (some rule with errno_ret 0 and no comparisons). */
bool local_seccomp_allows(const char *name);

/* The linux.seccomp object of config.json for the architecture asb serve was built for: default
 * action ERRNO(EPERM), architectures the native one only (a 32-bit syscall entry, int 0x80 on
 * x86_64, matches no architecture and is refused), then every rule of the table. A new reference,
 * NULL on allocation failure. */
json_t *local_seccomp_profile(void);
/* The same for a runtime handler: runsc (gVisor, --oci-seccomp) applies SCMP_ACT_ERRNO as EPERM
 * whatever errnoRet says, so its profile lets through the calls the table answers ENOSYS
 * (clone3), for the Sentry to answer. A new reference, NULL on allocation failure. */
json_t *local_seccomp_profile_for(bool runsc);
