/* Placeholder until the REST half lands: serves nothing. Deleted by the REST implementation. */
#include <stdlib.h>

#include "sandboxd/sandboxd-rest.h"

struct rest_server {
    int unused;
};

int rest_server_new(rest_server **ret, sandboxd *sd)
{
    *ret = calloc(1, sizeof(rest_server));
    return *ret ? 0 : -12;
}
void rest_server_stop_accepting(rest_server *s)
{
}
unsigned rest_server_active_requests(rest_server *s)
{
    return 0;
}
rest_server *rest_server_free(rest_server *s)
{
    free(s);
    return NULL;
}
