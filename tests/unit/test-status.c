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
    CHECK_INT_EQ(api_error_set(&e, STATUS_NOT_FOUND, "process %d not found", 42), -1);
    CHECK_STR_EQ(e.message, "process 42 not found");
    api_error_set(&e, STATUS_INTERNAL, "x");
    CHECK_STR_EQ(e.message, "x");
    api_error_clear(&e);
    CHECK(e.message == NULL);
}
