/* gRPC wire pieces that need no I/O: the 5-byte length-prefixed message framing, `grpc-timeout`
 * parsing and `grpc-message` percent-encoding. Pure functions, unit tested and fuzzed. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "basic/time-util.h"

#define GRPC_MAX_RECV_MESSAGE (4u * 1024 * 1024)
#define GRPC_FRAME_HEADER 5

/* Incremental decoder of length-prefixed messages (one per call direction). */
typedef struct grpc_frame_decoder {
    uint8_t hdr[GRPC_FRAME_HEADER];
    size_t hdr_len;
    uint8_t *msg; /* owned; the message being assembled */
    size_t msg_len, msg_have, msg_cap;
    size_t max; /* largest accepted message; 0 means GRPC_MAX_RECV_MESSAGE */
    int error;  /* sticky: once set, further input is ignored */
} grpc_frame_decoder;

/* Called with every complete message; the bytes are borrowed for the duration of the call.
 * A negative return stops decoding and is returned by grpc_frame_decode(). */
typedef int (*grpc_frame_cb)(void *payload, const uint8_t *msg, size_t len);

/* Feeds bytes. Returns 0, -EMSGSIZE (message over the limit), -EPROTONOSUPPORT (compressed
 * flag set: we negotiate no compression), -EBADMSG (flag byte not 0/1), -ENOMEM, or the
 * callback's negative value. Errors are sticky. */
int grpc_frame_decode(grpc_frame_decoder *d, const uint8_t *data, size_t len, grpc_frame_cb cb,
                      void *payload);
/* True when no partial message is buffered (a clean end of stream). */
bool grpc_frame_decoder_idle(const grpc_frame_decoder *d);
void grpc_frame_decoder_done(grpc_frame_decoder *d);

/* Writes the 5-byte prefix for an uncompressed message of `len` bytes. */
void grpc_frame_header(uint8_t out[GRPC_FRAME_HEADER], size_t len);

/* Parses a `grpc-timeout` value ("1*8DIGIT unit", unit one of H M S m u n) into microseconds
 * (rounded up, at least 1). Returns 0 or -EINVAL. */
int grpc_timeout_parse(const char *s, size_t len, usec_t *ret);

/* Percent-encodes `s` for the grpc-message trailer (bytes outside 0x20..0x7E and '%').
 * Returns a newly allocated string owned by the caller, or NULL on ENOMEM. */
char *grpc_message_encode(const char *s);
