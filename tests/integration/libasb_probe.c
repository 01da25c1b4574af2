/* Test driver for tests/integration/test_libasb_api.py: exercises libasb's public API against a
 * real `asb serve` and prints one line per result, so Python can check codes and messages.
 *   libasb_probe errors           CRUD and the error mapping
 *   libasb_probe watch RV MS      watch sandboxes from RV (- for none), cancel after MS ms
 *   libasb_probe token BADTOKEN   a request with a wrong token */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <asb/asb.h>

static const char *SBX = "{\"apiVersion\":\"agents.x-k8s.io/v1beta1\",\"kind\":\"Sandbox\","
                         "\"metadata\":{\"name\":\"%s\"%s},\"spec\":{\"podTemplate\":{\"spec\":"
                         "{\"containers\":[{\"name\":\"main\",\"image\":\"%s\"}]}}}}";

static void report(const char *what, int r)
{
    const asb_error *e = asb_error_last();
    printf("%s %d %s", what, r, asb_strerror(r));
    if (r != ASB_OK && e)
        printf(" | %s | %d | %s", e->reason, e->http_status, e->message);
    printf("\n");
    fflush(stdout);
}

static int errors(asb_client *c)
{
    char body[1024], *out = NULL;
    report("get-missing", asb_object_get(NULL, c, "sbx", NULL, "p1"));
    snprintf(body, sizeof(body), SBX, "p1", "", "host");
    report("create", asb_object_create(&out, c, "sandbox", NULL, body));
    const char *rv = out ? strstr(out, "\"resourceVersion\":\"") : NULL;
    char old_rv[32] = {0};
    if (rv)
        sscanf(rv + 19, "%31[^\"]", old_rv);
    asb_free(out);
    report("create-again", asb_object_create(NULL, c, "sandbox", NULL, body));
    report("patch", asb_object_patch(NULL, c, "sbx", NULL, "p1",
                                     "{\"metadata\":{\"labels\":"
                                     "{\"a\":\"b\"}}}",
                                     0));
    char md[64];
    snprintf(md, sizeof(md), ",\"resourceVersion\":\"%s\"", old_rv);
    snprintf(body, sizeof(body), SBX, "p1", md, "host");
    report("update-stale", asb_object_update(NULL, c, "sandboxes", NULL, body));
    snprintf(body, sizeof(body), SBX, "p2", "", "");
    report("create-invalid", asb_object_create(NULL, c, "sbx", NULL, body));
    report("status-patch", asb_object_patch(NULL, c, "sbx", NULL, "p1",
                                            "{\"status\":{\"conditions\":[{\"type\":\"Ready\","
                                            "\"status\":\"True\",\"reason\":\"R\",\"message\":\"\","
                                            "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}",
                                            1));
    asb_wait_options wo = ASB_WAIT_OPTIONS_INIT;
    wo.timeout_ms = 5000;
    report("wait-ready", asb_object_wait_condition(NULL, c, "sbx", NULL, "p1", "Ready", NULL, &wo));
    asb_list_options lo = ASB_LIST_OPTIONS_INIT;
    lo.label_selector = "a=b";
    report("list", asb_object_list(&out, c, "sbx", NULL, &lo));
    printf("list-has-p1 %d\n", out && strstr(out, "\"p1\"") != NULL);
    asb_free(out);
    report("list-bad-selector", asb_object_list(NULL, c, "sbx", NULL,
                                                &(asb_list_options){
                                                    .version = 1,
                                                    .label_selector = "a in (",
                                                }));
    report("delete", asb_object_delete(NULL, c, "sbx", NULL, "p1"));
    report("delete-again", asb_object_delete(NULL, c, "sbx", NULL, "p1"));
    report("unknown-kind", asb_object_get(NULL, c, "pods", NULL, "x"));
    report("wait-deleted", asb_object_wait_deleted(c, "sbx", NULL, "p1", &wo));
    return 0;
}

static volatile int cancel_flag, watch_done;
static long cancel_ms;

static void *canceller(void *arg)
{
    (void)arg;
    for (long waited = 0; waited < cancel_ms && !watch_done; waited += 10)
        usleep(10000);
    cancel_flag = 1;
    return NULL;
}

static int on_event(const char *type, const char *obj, void *payload)
{
    (void)payload;
    const char *n = strstr(obj, "\"name\":\"");
    char name[64] = "?";
    if (n)
        sscanf(n + 8, "%63[^\"]", name);
    printf("event %s %s\n", type, name);
    fflush(stdout);
    return strcmp(name, "stop") == 0 ? 42 : 0;
}

static int watch(asb_client *c, const char *rv, long ms)
{
    asb_watch_options o = ASB_WATCH_OPTIONS_INIT;
    o.resource_version = strcmp(rv, "-") == 0 ? NULL : rv;
    o.cancel = &cancel_flag;
    cancel_ms = ms;
    pthread_t th;
    pthread_create(&th, NULL, canceller, NULL);
    int r = asb_object_watch(c, "sandboxes", NULL, &o, on_event, NULL);
    watch_done = 1;
    report("watch", r);
    pthread_join(th, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    asb_client_options o = ASB_CLIENT_OPTIONS_INIT;
    if (strcmp(argv[1], "token") == 0 && argc > 2)
        o.token = argv[2];
    asb_client *c = NULL;
    int r = asb_client_new(&c, &o);
    if (r != ASB_OK) {
        report("client", r);
        return 1;
    }
    if (strcmp(argv[1], "errors") == 0)
        errors(c);
    else if (strcmp(argv[1], "watch") == 0 && argc > 3)
        watch(c, argv[2], atol(argv[3]));
    else if (strcmp(argv[1], "token") == 0)
        report("get", asb_object_list(NULL, c, "sbx", NULL, NULL));
    asb_client_free(c);
    return 0;
}
