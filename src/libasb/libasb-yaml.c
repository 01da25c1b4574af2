/* dlopen of libyaml on first use (see libasb-yaml.h for why). */
#include <pthread.h>
#include <stdio.h>

#include "shared/dlopen-util.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-yaml.h"

/* The SONAME of libyaml's ABI (Debian's libyaml-0-2). */
#define LIBYAML_SONAME "libyaml-0.so.2"

asbi_yaml_api asbi_yaml;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];

#define SYM(f) DLOPEN_SYMBOL("yaml_" #f, a.f)

static void load(void)
{
    asbi_yaml_api a = {0};
    const dlopen_symbol symbols[] = {
        SYM(parser_initialize),
        SYM(parser_set_input_string),
        SYM(parser_parse),
        SYM(parser_delete),
        SYM(event_delete),
        SYM(emitter_initialize),
        SYM(emitter_set_output),
        SYM(emitter_set_unicode),
        SYM(emitter_set_width),
        SYM(emitter_set_indent),
        SYM(emitter_emit),
        SYM(emitter_flush),
        SYM(emitter_delete),
        SYM(stream_start_event_initialize),
        SYM(stream_end_event_initialize),
        SYM(document_start_event_initialize),
        SYM(document_end_event_initialize),
        SYM(mapping_start_event_initialize),
        SYM(mapping_end_event_initialize),
        SYM(sequence_start_event_initialize),
        SYM(sequence_end_event_initialize),
        SYM(scalar_event_initialize),
    };
    api_error e = API_ERROR_INIT;
    if (dlopen_symbols(LIBYAML_SONAME, symbols, sizeof(symbols) / sizeof(symbols[0]), &e) < 0) {
        snprintf(load_error, sizeof(load_error), "%s", e.message ? e.message : "out of memory");
        api_error_clear(&e);
        return;
    }
    asbi_yaml = a;
}

int asbi_yaml_load(void)
{
    pthread_once(&load_once, load);
    if (load_error[0])
        return asbi_error_set(ASB_ERROR, 0, NULL, "cannot load libyaml: %s", load_error);
    return ASB_OK;
}
