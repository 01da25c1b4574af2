/* What `asb claim` waits for, told to a person at a terminal (stdout a TTY): each change of the
 * claim's Ready condition (libasb's progress callback) and the events recorded about the claim
 * and about its cold sandbox, which is named after the claim (Pulling and Pulled while an image
 * is unpacked, Started, a failed start with its reason), watched from when the claim is made on a
 * thread of its own. One line each, on stderr. */
#pragma once

typedef struct claim_progress claim_progress;

/* Starts watching the events of namespace ns from now; claim: the claim's name when it is
 * chosen by the caller (NULL: generated, learnt from the first Ready report). NULL when it
 * cannot (a server without events, out of memory): the Ready lines still come, with payload
 * NULL. Owned (claim_progress_stop). */
claim_progress *claim_progress_start(const char *ns, const char *claim);
/* asb_claim_options.progress (payload: the claim_progress, or NULL). */
void claim_progress_ready(const char *claim, const char *condition, void *payload);
/* Ends the watch (within about 100 ms) and frees p. NULL-safe; returns NULL. */
claim_progress *claim_progress_stop(claim_progress *p);
