/* Pure parts of sandboxd's gRPC half: message framing, grpc-timeout, grpc-message encoding,
 * PATH lookup, the process registry's ids, descriptor lookups. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandboxd/sandboxd-grpc-descriptors.h"
#include "sandboxd/sandboxd-grpc-frame.h"
#include "sandboxd/sandboxd-process-spawn.h"
#include "sandboxd/sandboxd-process.h"
#include "shared/status.h"
#include "unit.h"

typedef struct got {
    unsigned n;
    size_t lens[8];
    char data[8][64];
} got;

static int collect_cb(void *payload, const uint8_t *msg, size_t len)
{
    got *g = payload;
    if (g->n < 8) {
        g->lens[g->n] = len;
        memcpy(g->data[g->n], msg, len < 64 ? len : 64);
    }
    g->n++;
    return 0;
}

TEST(frame_decode_whole_and_split)
{
    uint8_t buf[64];
    grpc_frame_header(buf, 3);
    memcpy(buf + 5, "abc", 3);
    grpc_frame_header(buf + 8, 0);
    grpc_frame_header(buf + 13, 2);
    memcpy(buf + 18, "xy", 2);
    size_t total = 20;
    for (size_t split = 0; split <= total; split++) {
        grpc_frame_decoder d = {0};
        got g = {0};
        CHECK_INT_EQ(grpc_frame_decode(&d, buf, split, collect_cb, &g), 0);
        CHECK_INT_EQ(grpc_frame_decode(&d, buf + split, total - split, collect_cb, &g), 0);
        CHECK_INT_EQ(g.n, 3);
        CHECK_INT_EQ(g.lens[0], 3);
        CHECK(memcmp(g.data[0], "abc", 3) == 0);
        CHECK_INT_EQ(g.lens[1], 0);
        CHECK_INT_EQ(g.lens[2], 2);
        CHECK(memcmp(g.data[2], "xy", 2) == 0);
        CHECK(grpc_frame_decoder_idle(&d));
        grpc_frame_decoder_done(&d);
    }
}

TEST(frame_decode_byte_by_byte_partial)
{
    uint8_t buf[16];
    grpc_frame_header(buf, 4);
    memcpy(buf + 5, "wxyz", 4);
    grpc_frame_decoder d = {0};
    got g = {0};
    for (size_t i = 0; i < 8; i++)
        CHECK_INT_EQ(grpc_frame_decode(&d, buf + i, 1, collect_cb, &g), 0);
    CHECK_INT_EQ(g.n, 0);
    CHECK(!grpc_frame_decoder_idle(&d));
    CHECK_INT_EQ(grpc_frame_decode(&d, buf + 8, 1, collect_cb, &g), 0);
    CHECK_INT_EQ(g.n, 1);
    grpc_frame_decoder_done(&d);
}

TEST(frame_decode_limits)
{
    uint8_t hdr[5];
    grpc_frame_header(hdr, GRPC_MAX_RECV_MESSAGE + 1);
    grpc_frame_decoder d = {0};
    got g = {0};
    CHECK_INT_EQ(grpc_frame_decode(&d, hdr, 5, collect_cb, &g), -EMSGSIZE);
    CHECK_INT_EQ(grpc_frame_decode(&d, hdr, 5, collect_cb, &g), -EMSGSIZE); /* sticky */
    grpc_frame_decoder_done(&d);

    grpc_frame_decoder d2 = {0};
    uint8_t comp[6] = {1, 0, 0, 0, 1, 'a'};
    CHECK_INT_EQ(grpc_frame_decode(&d2, comp, 6, collect_cb, &g), -EPROTONOSUPPORT);
    grpc_frame_decoder d3 = {0};
    comp[0] = 7;
    CHECK_INT_EQ(grpc_frame_decode(&d3, comp, 6, collect_cb, &g), -EBADMSG);

    grpc_frame_decoder d4 = {.max = 4};
    grpc_frame_header(hdr, 4);
    CHECK_INT_EQ(grpc_frame_decode(&d4, hdr, 5, collect_cb, &g), 0);
    grpc_frame_decoder_done(&d4);
}

TEST(timeout_parse)
{
    usec_t t;
    CHECK_INT_EQ(grpc_timeout_parse("1S", 2, &t), 0);
    CHECK_INT_EQ(t, USEC_PER_SEC);
    CHECK_INT_EQ(grpc_timeout_parse("250m", 4, &t), 0);
    CHECK_INT_EQ(t, 250 * USEC_PER_MSEC);
    CHECK_INT_EQ(grpc_timeout_parse("2M", 2, &t), 0);
    CHECK_INT_EQ(t, 120 * USEC_PER_SEC);
    CHECK_INT_EQ(grpc_timeout_parse("1H", 2, &t), 0);
    CHECK_INT_EQ(t, 3600 * USEC_PER_SEC);
    CHECK_INT_EQ(grpc_timeout_parse("7u", 2, &t), 0);
    CHECK_INT_EQ(t, 7);
    CHECK_INT_EQ(grpc_timeout_parse("1500n", 5, &t), 0);
    CHECK_INT_EQ(t, 2);
    CHECK_INT_EQ(grpc_timeout_parse("0n", 2, &t), 0);
    CHECK_INT_EQ(t, 1);
    CHECK_INT_EQ(grpc_timeout_parse("99999999S", 9, &t), 0);
    CHECK_INT_EQ(grpc_timeout_parse("123456789S", 10, &t), -EINVAL); /* more than 8 digits */
    CHECK_INT_EQ(grpc_timeout_parse("S", 1, &t), -EINVAL);
    CHECK_INT_EQ(grpc_timeout_parse("10x", 3, &t), -EINVAL);
    CHECK_INT_EQ(grpc_timeout_parse("-1S", 3, &t), -EINVAL);
    CHECK_INT_EQ(grpc_timeout_parse("1 S", 3, &t), -EINVAL);
}

TEST(message_encode)
{
    char *s = grpc_message_encode("plain text");
    CHECK_STR_EQ(s, "plain text");
    free(s);
    s = grpc_message_encode("100%\n\xc3\xa9");
    CHECK_STR_EQ(s, "100%25%0A%C3%A9");
    free(s);
}

TEST(path_lookup)
{
    char dir[] = "/tmp/test-lookup-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char exe[128], plain[128], sub[128];
    snprintf(exe, sizeof(exe), "%s/tool", dir);
    snprintf(plain, sizeof(plain), "%s/plain", dir);
    snprintf(sub, sizeof(sub), "%s/adir", dir);
    close(open(exe, O_CREAT | O_WRONLY | O_CLOEXEC, 0755));
    close(open(plain, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    mkdir(sub, 0755);
    char path_env[300];
    snprintf(path_env, sizeof(path_env), "/nonexistent:%s", dir);
    char *r = path_lookup("tool", path_env);
    CHECK_STR_EQ(r, exe);
    free(r);
    CHECK(path_lookup("plain", path_env) == NULL);
    CHECK_INT_EQ(errno, ENOENT);
    CHECK(path_lookup("adir", path_env) == NULL);
    CHECK(path_lookup("", path_env) == NULL);
    CHECK(path_lookup("tool", NULL) == NULL);
    r = path_lookup("sh", "/usr/bin:/bin");
    CHECK(r != NULL && strstr(r, "/sh") != NULL);
    free(r);
    unlink(exe);
    unlink(plain);
    rmdir(sub);
    rmdir(dir);
}

TEST(registry_ids)
{
    process_table t = {.next_id = 1};
    CHECK_INT_EQ(process_table_next_id(&t), 1);
    CHECK_INT_EQ(process_table_next_id(&t), 2);
    CHECK_INT_EQ(process_table_next_id(&t), 3);
    static const child_ops ops = {0};
    child a = {.ops = &ops, .pid = 100, .id = 4}, b = {.ops = &ops, .pid = 101, .id = 0};
    process_table_add(&t, &a);
    process_table_add(&t, &b);
    CHECK_INT_EQ(t.live, 2);
    CHECK(process_table_find_id(&t, 4) == &a);
    CHECK(process_table_find_id(&t, 0) == NULL);
    CHECK(process_table_find_id(&t, 424242) == NULL);
    process_table_remove(&t, &a);
    CHECK(process_table_find_id(&t, 4) == NULL);
    CHECK_INT_EQ(t.live, 1);
    process_table_remove(&t, &b);
    CHECK(t.head == NULL);
    CHECK_INT_EQ(t.live, 0);
}

TEST(exit_codes)
{
    CHECK_INT_EQ(process_exit_code(42 << 8), 42);
    CHECK_INT_EQ(process_exit_code(9), -1); /* killed by SIGKILL */
}

TEST(descriptor_lookups)
{
    desc_files f;
    CHECK_INT_EQ(desc_files_parse(&f, asb_proto_descriptor_set, asb_proto_descriptor_set_len), 0);
    int p = desc_find_file(&f, "process.proto");
    CHECK(p >= 0);
    CHECK_INT_EQ(desc_find_symbol(&f, "process.v1.ProcessService"), p);
    CHECK_INT_EQ(desc_find_symbol(&f, "process.v1.ProcessService.ResizeTTY"), p);
    CHECK_INT_EQ(desc_find_symbol(&f, "process.v1.StartResponse"), p);
    CHECK_INT_EQ(desc_find_symbol(&f, "process.v1.ProcessConfig.EnvVarsEntry"), p);
    CHECK_INT_EQ(desc_find_symbol(&f, "process.v1.Signal"), p);
    CHECK_INT_EQ(desc_find_symbol(&f, "process.v1.Nope"), -ENOENT);
    CHECK_INT_EQ(desc_find_symbol(&f, "process.v1"), -ENOENT);
    CHECK_INT_EQ(desc_find_symbol(&f, "process.v1.ProcessServiceX"), -ENOENT);
    CHECK(desc_is_message(&f, "process.v1.PTY"));
    CHECK(!desc_is_message(&f, "process.v1.ProcessService"));
    int deps[DESC_MAX_FILES];
    size_t n = 0;
    desc_with_deps(&f, p, deps, &n);
    CHECK_INT_EQ(n, 2);
    CHECK_INT_EQ(deps[0], p);
    CHECK_INT_EQ(deps[1], desc_find_file(&f, "google/protobuf/empty.proto"));
    uint8_t bad[] = {0x0a, 0x7f, 0x01};
    CHECK_INT_EQ(desc_files_parse(&f, bad, sizeof(bad)), -EBADMSG);
}

static void cmd_env_has(const spawn_cmd *c, const char *kv, bool *found)
{
    *found = false;
    for (char **e = c->envp; *e; e++)
        if (strcmp(*e, kv) == 0)
            *found = true;
}

TEST(spawn_cmd_build_validation)
{
    char dir[] = "/tmp/test-spawn-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    sandboxd_config cfg = {0};
    sandboxd sd = {.config = &cfg, .root_path = dir};
    sd.root_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    CHECK(sd.root_fd >= 0);

    api_error err = API_ERROR_INIT;
    spawn_cmd c = SPAWN_CMD_INIT;
    CHECK(spawn_cmd_build(&c, &sd, NULL, &err) < 0);
    CHECK_INT_EQ(err.code, STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(err.message, "command is required");
    spawn_cmd_done(&c);
    api_error_clear(&err);

    Process__V1__ProcessConfig pc = PROCESS__V1__PROCESS_CONFIG__INIT;
    CHECK(spawn_cmd_build(&c, &sd, &pc, &err) < 0);
    CHECK_INT_EQ(err.code, STATUS_INVALID_ARGUMENT);
    spawn_cmd_done(&c);
    api_error_clear(&err);

    char *nope[] = {"no-such-program-xyz"};
    pc.n_command = 1;
    pc.command = nope;
    CHECK(spawn_cmd_build(&c, &sd, &pc, &err) < 0);
    CHECK_INT_EQ(err.code, STATUS_NOT_FOUND);
    CHECK(strstr(err.message, "exec: \"no-such-program-xyz\": executable file not found in $PATH"));
    spawn_cmd_done(&c);
    api_error_clear(&err);

    char *sh[] = {"sh", "-c", "true"};
    pc.n_command = 3;
    pc.command = sh;
    pc.cwd = "../..";
    CHECK(spawn_cmd_build(&c, &sd, &pc, &err) < 0);
    CHECK_INT_EQ(err.code, STATUS_PERMISSION_DENIED);
    CHECK(strncmp(err.message, "cwd: access denied", 18) == 0);
    spawn_cmd_done(&c);
    api_error_clear(&err);

    pc.cwd = "missing";
    CHECK_INT_EQ(spawn_cmd_build(&c, &sd, &pc, &err), 0);
    CHECK_INT_EQ(c.cwd_errno, ENOENT); /* fails at spawn: NOT_FOUND, id consumed */
    spawn_cmd_done(&c);

    Process__V1__ProcessConfig__EnvVarsEntry e1 = PROCESS__V1__PROCESS_CONFIG__ENV_VARS_ENTRY__INIT;
    e1.key = "HOME";
    e1.value = "/override";
    Process__V1__ProcessConfig__EnvVarsEntry *ents[] = {&e1};
    pc.cwd = "";
    pc.n_env_vars = 1;
    pc.env_vars = ents;
    CHECK_INT_EQ(spawn_cmd_build(&c, &sd, &pc, &err), 0);
    CHECK(c.path && strstr(c.path, "/sh"));
    CHECK_STR_EQ(c.argv[0], "sh");
    CHECK(c.argv[3] == NULL);
    CHECK_INT_EQ(c.cwd_fd, -1);
    bool found;
    cmd_env_has(&c, "HOME=/override", &found);
    CHECK(found);
    unsigned homes = 0;
    for (char **e = c.envp; *e; e++)
        homes += strncmp(*e, "HOME=", 5) == 0;
    CHECK_INT_EQ(homes, 1);
    spawn_cmd_done(&c);
    close(sd.root_fd);
    rmdir(dir);
}
