/* libasb: a replaceable sandbox handle. Agent code that runs commands and moves files through an
 * asb_handle instead of an asb_sandbox can be unit-tested without any sandbox: give it a handle
 * from asb_handle_fake_new() (files in memory, commands answered by a callback), or one built on
 * your own asb_handle_ops.
 *
 * Memory a handle hands out (results, buffers, listings) is owned by the caller and released with
 * the usual functions (asb_sandbox_result_free, asb_free, asb_sandbox_file_entries_free), so an
 * ops implementation must allocate it with malloc(3). */
#ifndef ASB_HANDLE_H
#define ASB_HANDLE_H

#include "asb/common.h"
#include "asb/sandbox.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct asb_handle asb_handle;

/* The operations behind a handle; `impl` is the pointer given to asb_handle_new(). Every
 * operation may be NULL (calling it then gives ASB_EINVAL, "not supported by this handle").
 * Contracts are those of the asb_sandbox_* function of the same name. */
typedef struct asb_handle_ops {
    unsigned int version; /* ASB_HANDLE_OPS_VERSION */
    int (*execute)(asb_sandbox_result **out, void *impl, const char *const *argv,
                   const asb_sandbox_process_options *opts);
    int (*file_read)(char **out, size_t *out_len, void *impl, const char *path);
    int (*file_write)(void *impl, const char *path, unsigned int mode, const void *data,
                      size_t len);
    int (*file_list)(asb_sandbox_file_entry **out, size_t *out_count, void *impl, const char *path);
    int (*file_exists)(int *out, void *impl, const char *path);
    int (*file_delete)(void *impl, const char *path, int recursive);
    void (*free)(void *impl); /* called by asb_handle_free(); may be NULL */
} asb_handle_ops;

#define ASB_HANDLE_OPS_VERSION 1

/* A handle over caller-supplied ops (copied) and impl. *out is owned by the caller
 * (asb_handle_free). Returns ASB_OK, ASB_EINVAL or ASB_ENOMEM. */
ASB_PUBLIC int asb_handle_new(asb_handle **out, const asb_handle_ops *ops, void *impl);

/* A handle over a real sandbox. With take_ownership non-zero, asb_handle_free() frees the
 * sandbox too; otherwise the sandbox must outlive the handle. */
ASB_PUBLIC int asb_handle_from_sandbox(asb_handle **out, asb_sandbox *sandbox, int take_ownership);

/* Frees a handle (and what it owns). Accepts NULL. */
ASB_PUBLIC void asb_handle_free(asb_handle *handle);

ASB_PUBLIC int asb_handle_execute(asb_sandbox_result **out, asb_handle *handle,
                                  const char *const *argv, const asb_sandbox_process_options *opts);
ASB_PUBLIC int asb_handle_file_read(char **out, size_t *out_len, asb_handle *handle,
                                    const char *path);
ASB_PUBLIC int asb_handle_file_write(asb_handle *handle, const char *path, unsigned int mode,
                                     const void *data, size_t len);
ASB_PUBLIC int asb_handle_file_list(asb_sandbox_file_entry **out, size_t *out_count,
                                    asb_handle *handle, const char *path);
ASB_PUBLIC int asb_handle_file_exists(int *out, asb_handle *handle, const char *path);
ASB_PUBLIC int asb_handle_file_delete(asb_handle *handle, const char *path, int recursive);

/* The fake: answers a command. Fill res->exit_code and, if wanted, res->out_data/out_len and
 * res->err_data/err_len (malloc'd; NULL is fine) and return ASB_OK, or return an error code. */
typedef int (*asb_handle_fake_exec_cb)(asb_sandbox_result *res, const char *const *argv,
                                       void *payload);

/* A fake handle: files live in memory (paths normalised: leading '/' and "./" dropped, parent
 * directories implied by the files under them), commands go to exec_cb (NULL: every command
 * exits 0 with no output). Reads of missing files give ASB_ENOTFOUND, as a sandbox would. */
ASB_PUBLIC int asb_handle_fake_new(asb_handle **out, asb_handle_fake_exec_cb exec_cb,
                                   void *payload);

/* How many commands the fake has run so far, and the last one joined with spaces (borrowed,
 * valid until the next call on the handle; NULL before any). For other handles: 0 and NULL. */
ASB_PUBLIC size_t asb_handle_fake_commands(const asb_handle *handle, const char **last);

#ifdef __cplusplus
}
#endif
#endif
