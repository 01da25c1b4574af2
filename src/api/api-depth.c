/* How deeply a JSON value nests. Every object the API stores is at most API_MAX_DEPTH deep, so
 * the recursive code that walks objects (jansson's parser and encoder, patches, validation) needs
 * a bounded stack: asb serve's request threads run on small stacks (local-apiserver.c). */
#include "api/api.h"

bool api_json_deeper_than(const json_t *j, unsigned max)
{
    if (!json_is_object(j) && !json_is_array(j))
        return false;
    if (max == 0)
        return true;
    if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            if (api_json_deeper_than(json_array_get(j, i), max - 1))
                return true;
        return false;
    }
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)j, key, v)
        if (api_json_deeper_than(v, max - 1))
            return true;
    return false;
}

/* Counts brackets outside strings; whether the text is valid JSON is the parser's question. */
bool api_json_text_deeper_than(const char *s, size_t n, unsigned max)
{
    unsigned depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_string) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_string = false;
        } else if (ch == '"')
            in_string = true;
        else if (ch == '{' || ch == '[') {
            if (++depth > max)
                return true;
        } else if ((ch == '}' || ch == ']') && depth > 0)
            depth--;
    }
    return false;
}
