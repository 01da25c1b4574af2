/* Progress of `asb claim` on a terminal (asb-claim-progress.h). */
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "asb/asb.h"
#include "basic/macro.h"
#include "cli/asb-cli.h"
#include "cli/asb-claim-progress.h"

/* Events that came before the claim's name was known (the claim is created, and named, inside
 * asb_claim_create): kept until the first Ready report names it. A cold start records a few. */
#define PENDING_MAX 32

typedef struct pending_event {
    char *about; /* regarding.name */
    char *line;  /* "REASON: NOTE" */
} pending_event;

struct claim_progress {
    pthread_t thread;
    asb_client *client; /* the watch thread's own */
    char *ns;
    char *rv; /* the events' resourceVersion when the claim was about to be made */
    volatile int cancel;
    pthread_mutex_t lock; /* claim, pending, and the lines on stderr */
    char *claim;
    pending_event pending[PENDING_MAX];
    size_t npending;
};

/* One line about the claim; caller holds the lock. */
static void say(const char *claim, const char *line)
{
    fprintf(stderr, "claim %s: %s\n", claim, line);
    fflush(stderr);
}

static int on_event(const char *type, const char *object_json, void *payload)
{
    claim_progress *p = payload;
    if (strcmp(type, "ADDED") != 0)
        return 0; /* recorded events are added; a count bumped on a repeat is not news */
    json_t *ev = json_loads(object_json, 0, NULL);
    const char *about =
        json_string_value(json_object_get(json_object_get(ev, "regarding"), "name"));
    const char *reason = json_string_value(json_object_get(ev, "reason"));
    const char *note = json_string_value(json_object_get(ev, "note"));
    char *line = NULL;
    if (about && reason && asprintf(&line, "%s: %s", reason, note ? note : "") < 0)
        line = NULL;
    pthread_mutex_lock(&p->lock);
    if (line && p->claim && strcmp(about, p->claim) == 0)
        say(p->claim, line);
    else if (line && !p->claim && p->npending < PENDING_MAX &&
             (p->pending[p->npending].about = strdup(about))) {
        p->pending[p->npending++].line = TAKE_PTR(line);
    }
    pthread_mutex_unlock(&p->lock);
    free(line);
    json_decref(ev);
    return 0;
}

static void *watch_thread(void *arg)
{
    claim_progress *p = arg;
    asb_watch_options wo = ASB_WATCH_OPTIONS_INIT;
    wo.resource_version = p->rv;
    wo.cancel = &p->cancel;
    /* Ends on cancel; an error (a server gone, an expired version) just ends the progress. */
    (void)asb_object_watch(p->client, "events", p->ns, &wo, on_event, p);
    return NULL;
}

/* The events' current resourceVersion (owned), or NULL. Asked with a field selector no event
 * matches, so the answer is an empty list whatever the namespace holds. */
static char *events_version(asb_client *cl, const char *ns)
{
    asb_list_options lo = ASB_LIST_OPTIONS_INIT;
    lo.field_selector = "metadata.name=asb-claim-progress.none";
    char *text = NULL;
    if (asb_object_list(&text, cl, "events", ns, &lo) != ASB_OK)
        return NULL;
    json_t *list = json_loads(text, 0, NULL);
    asb_free(text);
    const char *rv =
        json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
    char *ret = rv ? strdup(rv) : NULL;
    json_decref(list);
    return ret;
}

static void progress_free(claim_progress *p)
{
    asb_client_free(p->client);
    free(p->ns);
    free(p->rv);
    free(p->claim);
    for (size_t i = 0; i < p->npending; i++) {
        free(p->pending[i].about);
        free(p->pending[i].line);
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

claim_progress *claim_progress_start(const char *ns, const char *claim)
{
    claim_progress *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    if ((claim && !(p->claim = strdup(claim))) || cli_client(&p->client) != 0 ||
        !(p->ns = strdup(ns)) || !(p->rv = events_version(p->client, ns)) ||
        pthread_create(&p->thread, NULL, watch_thread, p) != 0) {
        progress_free(p);
        return NULL;
    }
    return p;
}

void claim_progress_ready(const char *claim, const char *condition, void *payload)
{
    claim_progress *p = payload;
    char line[600];
    snprintf(line, sizeof(line), "waiting for Ready (%s)", condition);
    if (!p) {
        say(claim, line);
        return;
    }
    pthread_mutex_lock(&p->lock);
    if (!p->claim && (p->claim = strdup(claim))) {
        /* what was recorded about it before we knew its name, in order */
        for (size_t i = 0; i < p->npending; i++)
            if (strcmp(p->pending[i].about, claim) == 0)
                say(claim, p->pending[i].line);
    }
    say(claim, line);
    pthread_mutex_unlock(&p->lock);
}

claim_progress *claim_progress_stop(claim_progress *p)
{
    if (!p)
        return NULL;
    p->cancel = 1;
    pthread_join(p->thread, NULL);
    progress_free(p);
    return NULL;
}
