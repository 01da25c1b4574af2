/* The `asb` command: one file per verb (asb-<verb>.c), dispatched from the table in asb.c. */
#pragma once

#include <stddef.h>

/* Each verb gets argv with argv[0] = the verb name; returns the process exit code. */
/* `asb serve` in the client: execs asb-server with the same arguments; returns only on failure. */
int asb_serve_exec(int argc, char **argv);
int asb_apply(int argc, char **argv);
int asb_get(int argc, char **argv);
int asb_delete(int argc, char **argv);
int asb_wait(int argc, char **argv);
int asb_exec(int argc, char **argv);
int asb_cp(int argc, char **argv);
int asb_ls(int argc, char **argv);
int asb_suspend(int argc, char **argv);
int asb_resume(int argc, char **argv);
int asb_logs(int argc, char **argv);
int asb_top(int argc, char **argv);
int asb_preview(int argc, char **argv);
int asb_port_forward(int argc, char **argv);
int asb_claim_main(int argc, char **argv);
int asb_release(int argc, char **argv);
int asb_extend(int argc, char **argv);
int asb_snapshot_main(int argc, char **argv);
int asb_fork_main(int argc, char **argv);
int asb_mcp(int argc, char **argv);
int asb_describe(int argc, char **argv);
int asb_version_main(int argc, char **argv);
int asb_completion(int argc, char **argv);
int asb_create(int argc, char **argv);
int asb_replace(int argc, char **argv);
int asb_label(int argc, char **argv);
int asb_annotate(int argc, char **argv);
int asb_patch(int argc, char **argv);
int asb_edit(int argc, char **argv);
int asb_scale(int argc, char **argv);
int asb_api_resources(int argc, char **argv);
int asb_explain(int argc, char **argv);
/* The i-th verb of asb's table (for completion), NULL past the end. */
const char *asb_verb_name(size_t i);
