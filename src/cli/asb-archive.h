/* libarchive for `asb cp -r` and absolute sandbox paths (tar streams, as kubectl cp), loaded when
 * such a copy starts (dlopen) rather than linked into asb: few runs copy directories, and every
 * run would pay its load (docs/performance.md, "CLI start"). asb-cp-tar.c includes this header
 * instead of <archive.h> and calls the archive_* names as usual; cli_archive_load() must have
 * returned 0 first. */
#pragma once

#include <archive.h>
#include <archive_entry.h>

/* Every function used, once: X(name). */
#define CLI_ARCHIVE_FUNCS(X)                                                                       \
    X(archive_error_string)                                                                        \
    X(archive_read_new)                                                                            \
    X(archive_read_support_format_tar)                                                             \
    X(archive_read_open_fd)                                                                        \
    X(archive_read_next_header)                                                                    \
    X(archive_read_data_block)                                                                     \
    X(archive_read_data)                                                                           \
    X(archive_read_free)                                                                           \
    X(archive_read_disk_new)                                                                       \
    X(archive_read_disk_set_standard_lookup)                                                       \
    X(archive_read_disk_set_symlink_physical)                                                      \
    X(archive_read_disk_open)                                                                      \
    X(archive_read_disk_descend)                                                                   \
    X(archive_read_next_header2)                                                                   \
    X(archive_read_close)                                                                          \
    X(archive_write_new)                                                                           \
    X(archive_write_set_format_pax_restricted)                                                     \
    X(archive_write_open)                                                                          \
    X(archive_write_header)                                                                        \
    X(archive_write_data)                                                                          \
    X(archive_write_close)                                                                         \
    X(archive_write_free)                                                                          \
    X(archive_write_disk_new)                                                                      \
    X(archive_write_disk_set_options)                                                              \
    X(archive_write_disk_set_standard_lookup)                                                      \
    X(archive_write_data_block)                                                                    \
    X(archive_write_finish_entry)                                                                  \
    X(archive_entry_new)                                                                           \
    X(archive_entry_free)                                                                          \
    X(archive_entry_clear)                                                                         \
    X(archive_entry_pathname)                                                                      \
    X(archive_entry_set_pathname)                                                                  \
    X(archive_entry_hardlink)                                                                      \
    X(archive_entry_set_hardlink)                                                                  \
    X(archive_entry_sourcepath)                                                                    \
    X(archive_entry_filetype)                                                                      \
    X(archive_entry_set_filetype)                                                                  \
    X(archive_entry_set_perm)                                                                      \
    X(archive_entry_set_size)

#define CLI_ARCHIVE_FIELD(name) __typeof__(name) *name;
typedef struct cli_archive_api {
    CLI_ARCHIVE_FUNCS(CLI_ARCHIVE_FIELD)
} cli_archive_api;
#undef CLI_ARCHIVE_FIELD

/* Filled by cli_archive_load(); read-only afterwards. */
extern cli_archive_api cli_archive;

/* Loads libarchive once (thread-safe). 0, or a negative errno with the reason printed on stderr. */
int cli_archive_load(void);
