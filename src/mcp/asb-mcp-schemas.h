/* JSON Schemas of the `asb mcp` tools (inputs and structured outputs), as JSON text. */
#pragma once

#define MCP_NS_PROP                                                                                \
    "\"namespace\":{\"type\":\"string\",\"default\":\"default\",\"description\":\"Namespace of "  \
    "the sandbox (default: default)\"}"
#define MCP_NAME_PROP                                                                              \
    "\"sandbox_claim_name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The claim "    \
    "name create_sandbox returned (a Sandbox name works too)\"}"
#define MCP_PATH_PROP(what)                                                                        \
    "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"" what                       \
    " (relative to the sandbox root; a leading / is the root too)\"}"

#define MCP_SCHEMA_CREATE_IN                                                                       \
    "{\"type\":\"object\",\"properties\":{"                                                        \
    "\"warmpool\":{\"type\":\"string\",\"minLength\":1,\"description\":\"SandboxWarmPool to "     \
    "claim from\"}," MCP_NS_PROP ","                                                               \
    "\"sandbox_ready_timeout\":{\"type\":\"integer\",\"minimum\":1,\"default\":180,"              \
    "\"description\":\"Seconds to wait for the sandbox to be ready\"},"                           \
    "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"             \
    "\"description\":\"Labels of the SandboxClaim\"},"                                            \
    "\"shutdown_after_seconds\":{\"type\":[\"integer\",\"null\"],\"minimum\":1,\"default\":300,"  \
    "\"description\":\"Delete the sandbox this many seconds from now; null: never\"},"            \
    "\"pod_labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"         \
    "\"pod_annotations\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}"     \
    "},\"required\":[\"warmpool\"]}"
#define MCP_SCHEMA_CREATE_OUT                                                                      \
    "{\"type\":\"object\",\"properties\":{\"sandbox_claim_name\":{\"type\":\"string\"},"          \
    "\"sandbox_name\":{\"type\":\"string\"},\"namespace\":{\"type\":\"string\"}},"                 \
    "\"required\":[\"sandbox_claim_name\",\"namespace\"]}"

#define MCP_SCHEMA_DELETE_IN                                                                       \
    "{\"type\":\"object\",\"properties\":{" MCP_NAME_PROP "," MCP_NS_PROP                          \
    "},\"required\":[\"sandbox_claim_name\"]}"
#define MCP_SCHEMA_DELETE_OUT                                                                      \
    "{\"type\":\"object\",\"properties\":{\"deleted\":{\"type\":\"string\"},"                     \
    "\"kind\":{\"type\":\"string\"}},\"required\":[\"deleted\",\"kind\"]}"

#define MCP_SCHEMA_PREVIEW_IN                                                                      \
    "{\"type\":\"object\",\"properties\":{" MCP_NAME_PROP "," MCP_NS_PROP ","                      \
    "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535,\"description\":\"Port "       \
    "of a server listening inside the sandbox (not 8080, 9090 or 8888)\"},"                        \
    "\"ttl_seconds\":{\"type\":\"integer\",\"minimum\":1,\"default\":86400,\"description\":"       \
    "\"How long the link is valid\"}},\"required\":[\"sandbox_claim_name\",\"port\"]}"
#define MCP_SCHEMA_PREVIEW_OUT                                                                     \
    "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\"},"                          \
    "\"port\":{\"type\":\"integer\"}},\"required\":[\"url\",\"port\"]}"

#define MCP_SCHEMA_EXEC_IN                                                                         \
    "{\"type\":\"object\",\"properties\":{" MCP_NAME_PROP "," MCP_NS_PROP ","                      \
    "\"command\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Shell command line, run " \
    "by /bin/sh -c\"},"                                                                            \
    "\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"default\":60,\"description\":\"Seconds "   \
    "before the command is killed\"}},\"required\":[\"sandbox_claim_name\",\"command\"]}"
#define MCP_SCHEMA_EXEC_OUT                                                                        \
    "{\"type\":\"object\",\"properties\":{\"exit_code\":{\"type\":\"integer\"},"                  \
    "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"}},"                          \
    "\"required\":[\"exit_code\",\"stdout\",\"stderr\"]}"

#define MCP_SCHEMA_UPLOAD_IN                                                                       \
    "{\"type\":\"object\",\"properties\":{" MCP_NAME_PROP "," MCP_NS_PROP                          \
    "," MCP_PATH_PROP("Destination file") ","                                                      \
    "\"content\":{\"type\":\"string\",\"description\":\"File content (base64 when binary)\"},"     \
    "\"binary\":{\"type\":\"boolean\",\"default\":false}},"                                        \
    "\"required\":[\"sandbox_claim_name\",\"path\",\"content\"]}"
#define MCP_SCHEMA_UPLOAD_OUT                                                                      \
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"                        \
    "\"bytes_written\":{\"type\":\"integer\"}},\"required\":[\"path\",\"bytes_written\"]}"

#define MCP_SCHEMA_DOWNLOAD_IN                                                                     \
    "{\"type\":\"object\",\"properties\":{" MCP_NAME_PROP "," MCP_NS_PROP                          \
    "," MCP_PATH_PROP("File to read") ","                                                          \
    "\"binary\":{\"type\":\"boolean\",\"default\":false,\"description\":\"Return the content "    \
    "base64-encoded\"}},\"required\":[\"sandbox_claim_name\",\"path\"]}"
#define MCP_SCHEMA_DOWNLOAD_OUT                                                                    \
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"                        \
    "\"content\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"                           \
    "\"binary\":{\"type\":\"boolean\"}},\"required\":[\"path\",\"content\",\"size\"]}"

#define MCP_SCHEMA_LIST_IN                                                                         \
    "{\"type\":\"object\",\"properties\":{" MCP_NAME_PROP "," MCP_NS_PROP                          \
    "," MCP_PATH_PROP("Directory to list") ","                                                     \
    "\"max_entries\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10000,\"default\":1000}},"   \
    "\"required\":[\"sandbox_claim_name\"]}"
#define MCP_SCHEMA_LIST_OUT                                                                        \
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"                        \
    "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"              \
    "\"name\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"                              \
    "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"directory\"]},"                            \
    "\"mod_time\":{\"type\":\"string\",\"format\":\"date-time\"}},"                                \
    "\"required\":[\"name\",\"size\",\"type\",\"mod_time\"]}},"                                    \
    "\"total_entries\":{\"type\":\"integer\"},\"truncated\":{\"type\":\"boolean\"}},"              \
    "\"required\":[\"entries\",\"total_entries\",\"truncated\"]}"

#define MCP_SCHEMA_EXISTS_IN                                                                       \
    "{\"type\":\"object\",\"properties\":{" MCP_NAME_PROP "," MCP_NS_PROP                          \
    "," MCP_PATH_PROP("Path to check") "},\"required\":[\"sandbox_claim_name\",\"path\"]}"
#define MCP_SCHEMA_EXISTS_OUT                                                                      \
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"                        \
    "\"exists\":{\"type\":\"boolean\"}},\"required\":[\"path\",\"exists\"]}"

#define MCP_SCHEMA_SNAPSHOT_IN                                                                     \
    "{\"type\":\"object\",\"properties\":{" MCP_NAME_PROP "," MCP_NS_PROP ","                      \
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Name of the snapshot "       \
    "(default: generated from the sandbox's)\"},"                                                  \
    "\"wait\":{\"type\":\"boolean\",\"default\":true,\"description\":\"Wait until the snapshot "  \
    "is captured\"},"                                                                              \
    "\"timeout\":{\"type\":\"integer\",\"minimum\":1,\"default\":300,\"description\":\"Seconds "  \
    "to wait for the capture\"}},\"required\":[\"sandbox_claim_name\"]}"
#define MCP_SCHEMA_SNAPSHOT_OUT                                                                    \
    "{\"type\":\"object\",\"properties\":{\"snapshot_name\":{\"type\":\"string\"},"               \
    "\"sandbox_name\":{\"type\":\"string\"},\"namespace\":{\"type\":\"string\"},"                  \
    "\"ready\":{\"type\":\"boolean\"},\"files\":{\"type\":\"integer\"},"                           \
    "\"size_bytes\":{\"type\":\"integer\"},\"stored_bytes\":{\"type\":\"integer\"},"               \
    "\"pause_microseconds\":{\"type\":\"integer\"},"                                               \
    "\"captured_at\":{\"type\":\"string\",\"format\":\"date-time\"}},"                             \
    "\"required\":[\"snapshot_name\",\"sandbox_name\",\"namespace\",\"ready\"]}"

#define MCP_SCHEMA_FORK_IN                                                                         \
    "{\"type\":\"object\",\"properties\":{" MCP_NAME_PROP "," MCP_NS_PROP ","                      \
    "\"snapshot\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Fork from this "         \
    "snapshot (a snapshot_sandbox result) instead of snapshotting the sandbox now\"},"             \
    "\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":20,\"default\":1,"                 \
    "\"description\":\"How many sandboxes to start\"},"                                            \
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"Name of the fork (with "     \
    "count > 1: NAME-1 .. NAME-count); default: generated\"},"                                     \
    "\"sandbox_ready_timeout\":{\"type\":\"integer\",\"minimum\":1,\"default\":180,"              \
    "\"description\":\"Seconds to wait for the snapshot and the forks to be ready\"}}}"
#define MCP_SCHEMA_FORK_OUT                                                                        \
    "{\"type\":\"object\",\"properties\":{\"snapshot_name\":{\"type\":\"string\"},"               \
    "\"sandbox_names\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"                      \
    "\"namespace\":{\"type\":\"string\"}},"                                                        \
    "\"required\":[\"snapshot_name\",\"sandbox_names\",\"namespace\"]}"
