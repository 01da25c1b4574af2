/* Directory helpers shared by every component (sandboxd, asb, the agent, the toolbox). */
#pragma once

#include <sys/types.h>

/* Creates every missing parent directory of path (mode 0755), not path itself. 0 or -errno. */
int mkdir_parents(const char *path);
/* Creates path and its missing parents; a directory it creates gets exactly mode (umask
 * notwithstanding), an existing one is left as it is. 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);
/* The directory of the running executable, from /proc/self/exe ("/usr/bin" for /usr/bin/asb);
 * *ret is owned by the caller. 0 or -errno. */
int self_exe_dir(char **ret);
/* Removes path and everything below it, never following symlinks nor crossing mount points.
 * A missing path is success. 0 or -errno. */
int fs_rm_rf(const char *path);
