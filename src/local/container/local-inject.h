/* sandboxd injection: the binary, its ELF loader and shared libraries (found with ldd) copied
 * once into $ASB_STATE_DIR/inject/{bin,lib}, which every sandbox binds read-only at
 * /.asb/{bin,lib}, so sandboxd runs in any rootfs (DESIGN.md, Decisions). */
#pragma once

#define LOCAL_INJECT_TOOLBOX "geminicli-toolbox"

/* Copies sandboxd into dir/bin and its libraries into dir/lib; also geminicli-toolbox (from
 * local_inject_toolbox_path(), skipped when absent unless $ASB_TOOLBOX names it), run inside a
 * sandbox as `/.asb/lib/ld-linux-x86-64.so.2 --library-path /.asb/lib
 * /.asb/bin/geminicli-toolbox TOOL JSON` (docs/agent-toolbox.md). *ret_error owned on failure. */
int local_inject_prepare(const char *sandboxd, const char *dir, char **ret_error);

/* $ASB_TOOLBOX, else geminicli-toolbox next to the sandboxd binary. Owned. */
char *local_inject_toolbox_path(const char *sandboxd);
