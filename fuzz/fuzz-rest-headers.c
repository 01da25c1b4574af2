/* Request header parsers of the REST half: Range (checked against the file size), HTTP dates,
 * preconditions, query strings, Content-Type sniffing and Go JSON string escaping. Input: a file
 * size line, then the header value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandboxd/sandboxd-rest-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = strndup((const char *)data, size);
    if (!s)
        return 0;
    char *nl = strchr(s, '\n');
    int64_t fsize = nl ? strtoll(s, NULL, 10) : 1000;
    if (fsize < 0)
        fsize = 0;
    const char *v = nl ? nl + 1 : s;

    rest_range r = {0, 0};
    if (rest_range_parse(v, fsize, &r) == RANGE_SINGLE &&
        (r.start < 0 || r.length <= 0 || r.start + r.length > fsize))
        abort();
    rest_range *all = NULL;
    size_t n = 0;
    rest_range_result rr = rest_range_parse_all(v, fsize, &all, &n);
    if ((rr == RANGE_SINGLE || rr == RANGE_MULTI) != (all != NULL))
        abort();
    for (size_t i = 0; i < n; i++)
        if (all[i].start < 0 || all[i].length <= 0 || all[i].start + all[i].length > fsize)
            abort();
    free(all);
    time_t t;
    if (rest_http_date_parse(v, &t) == 0) {
        char text[64];
        rest_http_date_format(t, text, sizeof(text));
        rest_rfc3339_format(t, text, sizeof(text));
    }
    bool use;
    rest_check_preconditions(true, 1700000000, v, v, v, v, v, v, &use);
    char *q = NULL;
    if (rest_query_get(v, "mode", &q) == 0 && q) {
        mode_t m;
        if (rest_parse_mode(q, &m) == 0 && m > 0777)
            abort();
    }
    free(q);
    rest_is_multipart_form(v);
    json_buf b = {0};
    json_buf_string(&b, (const char *)data, size);
    char *out = json_buf_steal(&b, NULL);
    if (out && (strchr(out, '<') || strchr(out, '>') || strchr(out, '&')))
        abort(); /* must be HTML-escaped */
    free(out);
    free(s);
    return 0;
}
