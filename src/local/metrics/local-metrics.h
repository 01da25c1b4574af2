/* local/metrics: process-wide Prometheus counters and histograms, observed into from any
 * thread, and their text rendering with gauges its caller reads. The bottom of the control
 * plane: it includes no other folder of src/local, so the store can observe into it. Includes
 * from other folders of src/local: none; never from a folder above it (docs/architecture.md,
 * "src/local in rooms"). */
/* Prometheus metrics of `asb serve` (text exposition format 0.0.4), served at /metrics on the API
 * port. Counters and histograms are process-wide (one `asb serve` per process, as a Prometheus
 * client's default registry): the controllers, the store and the DNS forwarder observe into them
 * from any thread, the router's counters are its own (shared/router-stats.h), read at scrape time;
 * gauges (pools, sandboxes by phase, blocked connections) are read from the store at scrape time
 * so they can never drift from it. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include <stddef.h>

/* A claim became Ready for the first time at ready_at (RFC 3339): its latency from the first
 * request (client-first-requested-at, controller-first-observed-at, creationTimestamp), by
 * launch type ("warm", "cold"). */
void local_metrics_claim_ready(const json_t *claim, const char *ready_at, const char *launch_type);
/* One reconcile pass of `controller` ("claims", "sandboxes") took seconds; error: it failed. */
void local_metrics_reconcile(const char *controller, double seconds, bool error);
/* One failure of `controller` outside a timed pass (a sandbox that did not start). */
void local_metrics_reconcile_error(const char *controller);
/* One group-commit fdatasync of the store's WAL took seconds (what a durable write waits for). */
void local_metrics_store_sync(double seconds);
/* One DNS query from a sandbox; blocked: refused by its policy or budget. */
void local_metrics_dns_query(bool blocked);

/* Every metric in text format 0.0.4: *ret_text (NUL-terminated, owned) of *ret_len bytes. The
 * gauges come from pools and sandboxes (JSON arrays of the stored SandboxWarmPools and
 * Sandboxes, borrowed), which the caller lists from the store at scrape time: the counters
 * are below the store (it observes into them), the store is not below them. 0 or -ENOMEM. */
int local_metrics_render(const json_t *pools, const json_t *sandboxes, char **ret_text,
                         size_t *ret_len);
