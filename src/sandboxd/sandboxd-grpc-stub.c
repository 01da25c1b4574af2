/* Placeholder until the gRPC half lands: serves nothing. Deleted by the gRPC implementation. */
#include <stdlib.h>

#include "sandboxd/sandboxd-grpc.h"

struct grpc_server {
    int unused;
};

int grpc_server_new(grpc_server **ret, uv_loop_t *loop, sandboxd *sd)
{
    *ret = calloc(1, sizeof(grpc_server));
    return *ret ? 0 : -12;
}
void grpc_server_signal_processes(grpc_server *s, int sig)
{
}
unsigned grpc_server_live_processes(grpc_server *s)
{
    return 0;
}
void grpc_server_stop_accepting(grpc_server *s)
{
}
unsigned grpc_server_active_calls(grpc_server *s)
{
    return 0;
}
void grpc_server_close(grpc_server *s)
{
    free(s);
}
