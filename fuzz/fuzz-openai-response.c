/* What an (untrusted) model endpoint can send: a chat.completion body parsed into the assistant
 * message kept in history, and an error body turned into text. */
#include <stdint.h>
#include <stdlib.h>

#include "agent/agent-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *m = NULL;
    char *fin = NULL;
    api_error err = API_ERROR_INIT;
    if (agent_openai_parse_response((const char *)data, size, &m, &fin, &err) == 0) {
        char *s = json_dumps(m, JSON_COMPACT);
        free(s);
    }
    json_decref(m);
    free(fin);
    api_error_clear(&err);
    char *t = agent_openai_error_text(400, (const char *)data, size);
    free(t);
    return 0;
}
