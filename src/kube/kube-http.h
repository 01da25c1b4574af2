/* /healthz, /readyz and /metrics of asb-controller. */
#pragma once

#include "kube/kube.h"

/* Listens on addr ("host:port", ":port"; "0" or "" = disabled: *ret_daemon stays NULL).
 * *ret_bound (owned) is the bound address, for logs (port 0 picks a free port). */
int kube_http_start(kube_ctl *ctl, const char *addr, void **ret_daemon, char **ret_bound);
void kube_http_stop(void *daemon);
