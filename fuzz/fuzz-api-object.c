/* libFuzzer: untrusted JSON through the object model. An object is defaulted and validated as
 * every kind (and as an update of itself), after its unknown fields are pruned, and read as each
 * typed spec (api-objects.h); a two-element array [target, patch] goes through JSON
 * merge-patch and JSON patch and the results are validated; a string is parsed as label and
 * field selectors and matched against a fixed label set. The text must nest at least as deeply
 * as the value parsed from it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api-objects.h"
#include "api/api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The typed specs take any shape (what is not of its type reads as unset). */
static void parse_typed(const json_t *obj)
{
    api_sandbox_spec *s = NULL;
    api_template_spec *t = NULL;
    api_claim_spec *c = NULL;
    api_warmpool_spec *w = NULL;
    if (api_sandbox_spec_parse(obj, NULL, &s) == 0 && !s->pod_template.pod)
        abort();
    if (api_template_spec_parse(obj, NULL, &t) == 0 && !t->pod_template.pod)
        abort();
    (void)api_claim_spec_parse(obj, &c);
    (void)api_warmpool_spec_parse(obj, &w);
    api_sandbox_spec_free(s);
    api_template_spec_free(t);
    api_claim_spec_free(c);
    api_warmpool_spec_free(w);
}

static void check_object(const json_t *obj, const json_t *old)
{
    for (size_t i = 0; i < api_n_kinds; i++) {
        const api_kind *k = &api_kinds[i];
        json_t *copy = json_deep_copy(obj);
        if (!copy)
            return;
        /* As the API server does: unknown fields pruned first, then defaults and validation. */
        json_t *pruned = NULL;
        if (api_prune_unknown(k, copy, &pruned) == 0)
            json_decref(pruned);
        api_default(k, copy);
        api_errors errs = {0};
        api_validate(k, copy, old, &errs);
        parse_typed(copy);
        char *msg = api_errors_format(&errs, k, api_meta_string(copy, "name"));
        json_t *causes = api_errors_causes(&errs);
        free(msg);
        json_decref(causes);
        api_errors_clear(&errs);
        json_decref(copy);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!j)
        return 0;
    /* The text's depth (what the API server checks before parsing) is at least the parsed
     * value's (more when a duplicate key's dropped value nested deeper). */
    for (unsigned max = 0; max < 4; max++)
        if (api_json_deeper_than(j, max) &&
            !api_json_text_deeper_than((const char *)data, size, max))
            abort();
    if (json_is_object(j)) {
        check_object(j, NULL);
        check_object(j, json_object_get(j, "spec"));
    } else if (json_is_array(j) && json_array_size(j) == 2) {
        json_t *target = json_array_get(j, 0), *patch = json_array_get(j, 1);
        json_t *merged = api_merge_patch(target, patch);
        if (json_is_object(merged))
            check_object(merged, json_object_get(target, "spec"));
        /* The sharing merge gives the same text, and leaves the target as it was. */
        char *before = json_dumps(target, JSON_ENCODE_ANY);
        json_t *shared = api_merge_patch_shared(target, patch);
        char *m = merged ? json_dumps(merged, JSON_ENCODE_ANY) : NULL,
             *sh = shared ? json_dumps(shared, JSON_ENCODE_ANY) : NULL;
        json_decref(shared);
        char *after = json_dumps(target, JSON_ENCODE_ANY);
        if ((m && sh && strcmp(m, sh) != 0) || (before && after && strcmp(before, after) != 0))
            abort();
        free(before);
        free(after);
        free(m);
        free(sh);
        json_decref(merged);
        api_error err = API_ERROR_INIT;
        json_t *patched = NULL;
        if (api_json_patch(target, patch, &patched, &err) == 0 && json_is_object(patched))
            check_object(patched, NULL);
        json_decref(patched);
        api_error_clear(&err);
    } else if (json_is_string(j)) {
        api_selector *s = NULL;
        api_error err = API_ERROR_INIT;
        json_t *labels = json_pack("{s:s,s:s}", "app", "web", "n", "5");
        json_t *obj = json_pack("{s:{s:s,s:s}}", "metadata", "name", "x", "namespace", "default");
        if (api_label_selector_parse(json_string_value(j), &s, &err) == 0)
            (void)api_label_selector_matches(s, labels);
        s = api_selector_free(s);
        api_error_clear(&err);
        if (api_field_selector_parse(json_string_value(j), &s, &err) == 0)
            (void)api_field_selector_matches(s, obj);
        api_selector_free(s);
        api_error_clear(&err);
        json_decref(labels);
        json_decref(obj);
    }
    json_decref(j);
    return 0;
}
