/* `asb cp` through tar streams (asb-cp-tar.c): directories (-r) and absolute sandbox paths. */
#pragma once

#include <stdbool.h>

#include "asb/asb.h"

/* Copies the sandbox's rpath (absolute, or relative to its working root) to local ("-": the one
 * file to stdout; an existing directory or a path ending in '/': into it, by the source's
 * name). A directory needs recursive. Prints the error; returns the exit code. */
int cli_cp_tar_download(asb_sandbox *s, const char *sname, const char *rpath, const char *local,
                        bool recursive);
/* Copies local ("-": stdin) to the sandbox's rpath (into it when it is a directory there or
 * ends in '/'), modes and symbolic links kept. A directory needs recursive. Prints the error;
 * returns the exit code. */
int cli_cp_tar_upload(asb_sandbox *s, const char *sname, const char *local, const char *rpath,
                      bool recursive);
