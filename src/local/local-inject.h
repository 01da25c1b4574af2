/* sandboxd injection: the binary, its ELF loader and shared libraries (found with ldd) copied
 * once into $ASB_STATE_DIR/inject/{bin,lib}, which every sandbox binds read-only at
 * /.asb/{bin,lib}, so sandboxd runs in any rootfs (DESIGN.md, Decisions). */
#pragma once

/* Copies sandboxd into dir/bin and its libraries into dir/lib. *ret_error owned on failure. */
int local_inject_prepare(const char *sandboxd, const char *dir, char **ret_error);
