/* sandboxd REST half: /v1/files, /v1/health, /v1/metadata over HTTP/1.1 (libmicrohttpd), on TCP
 * (listen_host:rest_port) and optionally a unix socket path and/or an inherited listening fd.
 * Serves from its own threads; borrows the sandboxd state. */
#pragma once

#include "sandboxd/sandboxd.h"

typedef struct rest_server rest_server;

/* Binds and starts serving. Returns 0 or a negative errno (the message is logged). */
int rest_server_new(rest_server **ret, sandboxd *sd);
/* Shutdown: close the listeners; requests in flight go on, idle keep-alive connections close. */
void rest_server_stop_accepting(rest_server *s);
/* Requests currently being served (idle keep-alive connections do not count). */
unsigned rest_server_active_requests(rest_server *s);
/* Force-closes every connection, joins the threads and frees. Accepts NULL, returns NULL. */
rest_server *rest_server_free(rest_server *s);
