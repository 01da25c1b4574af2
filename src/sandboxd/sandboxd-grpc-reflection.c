#include "basic/macro.h"
#include "sandboxd/sandboxd-grpc-call.h"
const grpc_method grpc_reflection_methods[] = {{"/none", false, NULL, NULL, NULL, NULL}};
const size_t grpc_reflection_methods_count = 0;
