/* Structured daemon logging to stderr: `level msg key=value ...` or one JSON object per line. */
#pragma once

#include <stdbool.h>

typedef enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR } log_level;

void log_setup(const char *component, bool json, log_level min_level);

/* Logs `msg` with key/value string pairs terminated by NULL:
 * log_kv(LOG_LEVEL_INFO, "sandboxd listening", "grpc", addr, "rest", addr2, NULL). */
void log_kv(log_level level, const char *msg, ...) __attribute__((sentinel));

#define log_info(msg, ...) log_kv(LOG_LEVEL_INFO, msg, ##__VA_ARGS__, NULL)
#define log_warn(msg, ...) log_kv(LOG_LEVEL_WARN, msg, ##__VA_ARGS__, NULL)
#define log_error(msg, ...) log_kv(LOG_LEVEL_ERROR, msg, ##__VA_ARGS__, NULL)
#define log_debug(msg, ...) log_kv(LOG_LEVEL_DEBUG, msg, ##__VA_ARGS__, NULL)
