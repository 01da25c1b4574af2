/* The router's parsers of client input: X-Sandbox-* validation and dispatch, bearer-token
 * checks, legacy path decoding, shlex splitting of /execute commands and the multipart "file"
 * extraction of /upload. The first byte picks the parser; the rest is the input. Invariants:
 * dispatch results are consistent with the validation rules, split words contain no NUL, a
 * found multipart part lies inside the body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/strv.h"
#include "router/router-internal.h"
#include "router/router-legacy-parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Splits s at '\n' into up to n fields (NULL when absent). */
static void fields(char *s, char **out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = s;
        if (s) {
            char *nl = strchr(s, '\n');
            if (nl)
                *nl = '\0', s = nl + 1;
            else
                s = NULL;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    switch (data[0] % 5) {
    case 0: {
        char *f[6];
        fields(s, f, 6);
        router_request_info in = {"GET", f[0] ? f[0] : "/", f[1], f[2], f[3], f[4], f[5],
                                  f[1],  "localhost"};
        router_route out;
        _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
        int r = router_route_request(&in, &out, &err);
        if (r == 0) {
            if (!router_valid_dns_label(out.id) || !router_valid_dns_label(out.ns))
                abort();
        } else if (router_error_http(&err) != 400 && router_error_http(&err) != 502)
            abort();
        break;
    }
    case 1: {
        char *f[2];
        fields(s, f, 2);
        _cleanup_(api_error_clear) api_error err = API_ERROR_INIT;
        int r = router_check_auth(f[0], "secret-token-0123456789", data[0] & 8, data[0] & 16, &err);
        if (r < 0 && router_error_http(&err) != 401 && router_error_http(&err) != 500)
            abort();
        break;
    }
    case 2: {
        char *out = NULL;
        if (router_legacy_path(s, "/download/", &out) == 0) {
            if (!out)
                abort();
            free(out);
        }
        break;
    }
    case 3: {
        char **v = NULL;
        api_error e = API_ERROR_INIT;
        if (router_shlex_split(s, &v, &e) == 0) {
            for (size_t i = 0; v[i]; i++)
                if (strlen(v[i]) > strlen(s))
                    abort();
            strv_free(v);
        }
        api_error_clear(&e);
        break;
    }
    case 4: {
        char *f[2];
        fields(s, f, 2);
        if (!f[1])
            break;
        size_t off = (size_t)(f[1] - s);
        char *fn = NULL;
        const char *d = NULL;
        size_t n = 0;
        if (router_multipart_file(f[0], f[1], size - 1 - off, &fn, &d, &n) == 0) {
            if (d < f[1] || d + n > f[1] + (size - 1 - off))
                abort();
            free(fn);
        }
        fn = NULL;
        if (router_multipart_peek_filename(f[0], f[1], size - 1 - off, &fn) == 1) {
            if (!fn)
                abort();
            free(fn);
        }
        break;
    }
    }
    free(s);
    return 0;
}
