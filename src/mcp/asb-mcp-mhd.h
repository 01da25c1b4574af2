/* libmicrohttpd for `asb mcp --listen`, loaded when that mode starts (dlopen) rather than linked
 * into asb: it brings GnuTLS and its dependencies, whose load costs every `asb` run a
 * millisecond of CPU. asb-mcp-http.c includes this header instead of <microhttpd.h> and calls
 * the MHD_* names as usual; mcp_mhd_load() must have returned 0 first. */
#pragma once

#include <microhttpd.h>

typedef struct mcp_mhd_api {
    struct MHD_Daemon *(*start_daemon)(unsigned int flags, uint16_t port,
                                       MHD_AcceptPolicyCallback apc, void *apc_cls,
                                       MHD_AccessHandlerCallback dh, void *dh_cls, ...);
    void (*stop_daemon)(struct MHD_Daemon *daemon);
    struct MHD_Response *(*create_response_from_buffer)(size_t size, void *buffer,
                                                        enum MHD_ResponseMemoryMode mode);
    struct MHD_Response *(*create_response_from_callback)(uint64_t size, size_t block_size,
                                                          MHD_ContentReaderCallback crc,
                                                          void *crc_cls,
                                                          MHD_ContentReaderFreeCallback crfc);
    enum MHD_Result (*add_response_header)(struct MHD_Response *response, const char *header,
                                           const char *content);
    enum MHD_Result (*queue_response)(struct MHD_Connection *connection, unsigned int status_code,
                                      struct MHD_Response *response);
    void (*destroy_response)(struct MHD_Response *response);
    const char *(*lookup_connection_value)(struct MHD_Connection *connection,
                                           enum MHD_ValueKind kind, const char *key);
} mcp_mhd_api;

/* Filled by mcp_mhd_load(); read-only afterwards. */
extern mcp_mhd_api mcp_mhd;

/* Loads libmicrohttpd once (thread-safe). Returns 0, or a negative errno with the reason printed
 * on stderr (the CLI's diagnostics). */
int mcp_mhd_load(void);

#define MHD_start_daemon mcp_mhd.start_daemon
#define MHD_stop_daemon mcp_mhd.stop_daemon
#define MHD_create_response_from_buffer mcp_mhd.create_response_from_buffer
#define MHD_create_response_from_callback mcp_mhd.create_response_from_callback
#define MHD_add_response_header mcp_mhd.add_response_header
#define MHD_queue_response mcp_mhd.queue_response
#define MHD_destroy_response mcp_mhd.destroy_response
#define MHD_lookup_connection_value mcp_mhd.lookup_connection_value
