/* A standalone libasb program: build it with
 *     cc asb-example.c $(pkg-config --cflags --libs libasb) -o asb-example
 * It connects as the CLI does (ASB_SERVER/ASB_TOKEN or $ASB_STATE_DIR), creates a Sandbox from a
 * YAML manifest, waits for its Ready condition (set by someone else) with a timeout, lists the
 * Sandboxes and deletes it. Usage: asb-example NAME [TIMEOUT_MS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <asb/asb.h>

static int fail(const char *what)
{
    const asb_error *e = asb_error_last();
    fprintf(stderr, "%s: %s (%s)\n", what, e ? e->message : "?", asb_strerror(e ? e->code : -1));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s NAME [TIMEOUT_MS]\n", argv[0]);
        return 2;
    }
    const char *name = argv[1];
    long timeout = argc > 2 ? atol(argv[2]) : 10000;
    char yaml[512], *objects = NULL, *created = NULL, *ready = NULL, *list = NULL;
    snprintf(yaml, sizeof(yaml),
             "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: %s\n"
             "spec:\n  podTemplate:\n    spec:\n      containers:\n      - name: main\n"
             "        image: host\n",
             name);
    if (asb_manifest_parse(&objects, yaml, strlen(yaml)) != ASB_OK)
        return fail("parse");
    /* objects is a JSON array of one object: strip the brackets for the create call. */
    objects[strlen(objects) - 1] = '\0';

    asb_client *c = NULL;
    int ret = 1;
    if (asb_client_new(&c, NULL) != ASB_OK) {
        fail("connect");
        goto out;
    }
    printf("server %s, libasb %s\n", asb_client_server(c), asb_version());
    if (asb_object_create(&created, c, "sandbox", NULL, objects + 1) != ASB_OK) {
        fail("create");
        goto out;
    }
    printf("created\n");
    fflush(stdout);

    asb_wait_options wo = ASB_WAIT_OPTIONS_INIT;
    wo.timeout_ms = timeout;
    int r = asb_object_wait_condition(&ready, c, "sbx", NULL, name, "Ready", NULL, &wo);
    if (r == ASB_ETIMEOUT) {
        printf("timeout\n");
    } else if (r != ASB_OK) {
        fail("wait");
        goto out;
    } else {
        printf("ready\n");
    }

    asb_list_options lo = ASB_LIST_OPTIONS_INIT;
    if (asb_object_list(&list, c, "sandboxes", NULL, &lo) != ASB_OK) {
        fail("list");
        goto out;
    }
    printf("list has %s\n", strstr(list, name) ? name : "nothing");

    if (asb_object_delete(NULL, c, "sandboxes", NULL, name) != ASB_OK) {
        fail("delete");
        goto out;
    }
    r = asb_object_get(NULL, c, "sandboxes", NULL, name);
    printf("after delete: %s\n", asb_strerror(r));
    ret = 0;
out:
    asb_free(objects);
    asb_free(created);
    asb_free(ready);
    asb_free(list);
    asb_client_free(c);
    return ret;
}
