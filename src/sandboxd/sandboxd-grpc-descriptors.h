/* Lookups in the embedded FileDescriptorSet of proto/ files (with imports), for reflection.
 * A minimal protobuf wire walker: no descriptor.proto bindings needed. Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pb_bytes {
    const uint8_t *data;
    size_t len;
} pb_bytes;

#define DESC_MAX_FILES 32

/* Serialized FileDescriptorProtos in a FileDescriptorSet, borrowed from `set`. */
typedef struct desc_files {
    pb_bytes file[DESC_MAX_FILES];
    size_t n;
} desc_files;

/* Splits a FileDescriptorSet. Returns 0 or -EBADMSG. */
int desc_files_parse(desc_files *ret, const uint8_t *set, size_t len);
/* The index of the file named `name`, or -ENOENT. */
int desc_find_file(const desc_files *f, const char *name);
/* The index of the file defining the fully-qualified symbol (package.Message[.Nested],
 * package.Enum, package.Service[.Method]), or -ENOENT. */
int desc_find_symbol(const desc_files *f, const char *symbol);
/* True when `symbol` names a message type. */
bool desc_is_message(const desc_files *f, const char *symbol);
/* Adds file `idx` and its transitive dependencies to `out` (indices, deduplicated, requested file
 * first). `*n` is updated; `out` has room for DESC_MAX_FILES. */
void desc_with_deps(const desc_files *f, int idx, int *out, size_t *n);
/* Calls cb with every "package.Service" name. */
void desc_each_service(const desc_files *f, void (*cb)(void *payload, const char *name),
                       void *payload);

extern const unsigned char asb_proto_descriptor_set[];
extern const size_t asb_proto_descriptor_set_len;
