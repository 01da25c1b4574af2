#include <errno.h>

#include "shared/status.h"
#include "unit.h"

TEST(errno_mapping)
{
    CHECK_INT_EQ(status_from_errno(-ENOENT), STATUS_NOT_FOUND);
    CHECK_INT_EQ(status_from_errno(EACCES), STATUS_PERMISSION_DENIED);
    CHECK_INT_EQ(status_from_errno(-ERRNO_PATH_ESCAPE), STATUS_PERMISSION_DENIED);
    CHECK_INT_EQ(status_from_errno(-ENOTEMPTY), STATUS_CONFLICT);
    CHECK_INT_EQ(status_from_errno(-EIO), STATUS_INTERNAL);
    CHECK_INT_EQ(status_from_errno(0), STATUS_OK);
}

TEST(renderings)
{
    CHECK_STR_EQ(status_name(STATUS_CONFLICT), "CONFLICT");
    CHECK_INT_EQ(status_http(STATUS_CONFLICT), 409);
    CHECK_INT_EQ(status_grpc(STATUS_CONFLICT), 10);
    CHECK_INT_EQ(status_http(STATUS_UNAVAILABLE), 503);
    CHECK_INT_EQ(status_grpc(STATUS_PERMISSION_DENIED), 7);
    CHECK_STR_EQ(status_name(STATUS_INVALID_ARGUMENT), "INVALID_ARGUMENT");
}

TEST(api_error_owns_message)
{
    api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(api_error_set(&e, STATUS_NOT_FOUND, "process %d not found", 42), -ENOENT);
    CHECK_STR_EQ(e.message, "process 42 not found");
    api_error_set(&e, STATUS_INTERNAL, "x");
    CHECK_STR_EQ(e.message, "x");
    api_error_clear(&e);
    CHECK(e.message == NULL);
}

/* The rows kube-apiserver clients depend on: reason, wire name, HTTP status, errno. */
TEST(kube_reason_rows)
{
    static const struct {
        kube_reason r;
        const char *name;
        unsigned http;
        int err;
    } rows[] = {
        {KUBE_REASON_NOT_FOUND, "NotFound", 404, -ENOENT},
        {KUBE_REASON_ALREADY_EXISTS, "AlreadyExists", 409, -EEXIST},
        {KUBE_REASON_CONFLICT, "Conflict", 409, -ESTALE},
        {KUBE_REASON_INVALID, "Invalid", 422, -EINVAL},
        {KUBE_REASON_TIMEOUT, "Timeout", 504, -ETIMEDOUT},
        {KUBE_REASON_UNKNOWN, "", 500, -EIO},
        {(kube_reason)999, "", 500, -EIO},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const kube_reason_info *info = kube_reason_info_of(rows[i].r);
        CHECK_STR_EQ(info->name, rows[i].name);
        CHECK_INT_EQ(info->http, rows[i].http);
        CHECK_INT_EQ(info->err, rows[i].err);
    }
    CHECK_INT_EQ(kube_reason_info_of(KUBE_REASON_CONFLICT)->code, STATUS_CONFLICT);
    /* Names are exact and every named reason round-trips through its name. */
    CHECK_INT_EQ(kube_reason_from_name("alreadyexists"), KUBE_REASON_UNKNOWN);
    CHECK_INT_EQ(kube_reason_from_name(NULL), KUBE_REASON_UNKNOWN);
    CHECK_INT_EQ(kube_reason_from_name(""), KUBE_REASON_UNKNOWN);
    for (unsigned r = 1; r < KUBE_REASON_MAX; r++)
        CHECK_INT_EQ(kube_reason_from_name(kube_reason_info_of((kube_reason)r)->name), r);
}

TEST(kube_reason_from_http_and_errno)
{
    static const struct {
        unsigned http;
        kube_reason r;
    } by_http[] = {
        {404, KUBE_REASON_NOT_FOUND},      {409, KUBE_REASON_CONFLICT},
        {410, KUBE_REASON_GONE},           {422, KUBE_REASON_INVALID},
        {418, KUBE_REASON_BAD_REQUEST},    {500, KUBE_REASON_INTERNAL_ERROR},
        {502, KUBE_REASON_INTERNAL_ERROR}, {504, KUBE_REASON_TIMEOUT},
        {200, KUBE_REASON_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof(by_http) / sizeof(by_http[0]); i++)
        CHECK_INT_EQ(kube_reason_from_http(by_http[i].http), by_http[i].r);
    CHECK_INT_EQ(kube_reason_from_errno(-ENOENT), KUBE_REASON_NOT_FOUND);
    CHECK_INT_EQ(kube_reason_from_errno(EEXIST), KUBE_REASON_ALREADY_EXISTS);
    CHECK_INT_EQ(kube_reason_from_errno(-EIO), KUBE_REASON_INTERNAL_ERROR);
    CHECK_INT_EQ(kube_reason_from_status(STATUS_ABORTED), KUBE_REASON_CONFLICT);
    CHECK_INT_EQ(kube_reason_from_status(STATUS_INTERNAL), KUBE_REASON_INTERNAL_ERROR);
}

TEST(api_error_carries_errno_and_reason)
{
    api_error e = API_ERROR_INIT;
    CHECK_INT_EQ(api_error_set_errno(&e, -EEXIST, "%s exists", "x"), -EEXIST);
    CHECK_INT_EQ(e.code, STATUS_CONFLICT);
    CHECK_INT_EQ(e.err, -EEXIST);
    CHECK_INT_EQ(api_error_reason(&e), KUBE_REASON_ALREADY_EXISTS);
    CHECK_STR_EQ(e.message, "x exists");
    api_error_set_reason(&e, KUBE_REASON_INVALID, "bad");
    CHECK_INT_EQ(e.code, STATUS_INVALID_ARGUMENT);
    CHECK_INT_EQ(api_error_errno(&e), -EINVAL);
    CHECK_INT_EQ(kube_reason_info_of(api_error_reason(&e))->http, 422);
    /* A plain status error derives its reason and errno from the code. */
    api_error_set(&e, STATUS_NOT_FOUND, "gone");
    CHECK_INT_EQ(api_error_reason(&e), KUBE_REASON_NOT_FOUND);
    CHECK_INT_EQ(api_error_errno(&e), -ENOENT);
    api_error_clear(&e);
    CHECK(e.message == NULL);
    CHECK_INT_EQ(e.err, 0);
    CHECK_INT_EQ(e.reason, KUBE_REASON_UNKNOWN);
}
