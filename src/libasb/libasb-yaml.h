/* libyaml, loaded when a manifest is first read or written as YAML (dlopen), not at every
 * process start: only `asb apply` and `-o yaml` need it, while every `asb` run paid its load
 * (~0.14 ms of CPU on a 2-CPU VM, docs/performance.md). libasb-manifest.c includes this header
 * instead of <yaml.h> and calls the yaml_* names as usual; asbi_yaml_load() must have returned
 * ASB_OK before any of them is called. */
#pragma once

#include <yaml.h>

typedef struct asbi_yaml_api {
    int (*parser_initialize)(yaml_parser_t *parser);
    void (*parser_set_input_string)(yaml_parser_t *parser, const unsigned char *input,
                                    size_t size);
    int (*parser_parse)(yaml_parser_t *parser, yaml_event_t *event);
    void (*parser_delete)(yaml_parser_t *parser);
    void (*event_delete)(yaml_event_t *event);
    int (*emitter_initialize)(yaml_emitter_t *emitter);
    void (*emitter_set_output)(yaml_emitter_t *emitter, yaml_write_handler_t *handler,
                               void *data);
    void (*emitter_set_unicode)(yaml_emitter_t *emitter, int unicode);
    void (*emitter_set_width)(yaml_emitter_t *emitter, int width);
    void (*emitter_set_indent)(yaml_emitter_t *emitter, int indent);
    int (*emitter_emit)(yaml_emitter_t *emitter, yaml_event_t *event);
    int (*emitter_flush)(yaml_emitter_t *emitter);
    void (*emitter_delete)(yaml_emitter_t *emitter);
    int (*stream_start_event_initialize)(yaml_event_t *event, yaml_encoding_t encoding);
    int (*stream_end_event_initialize)(yaml_event_t *event);
    int (*document_start_event_initialize)(yaml_event_t *event,
                                           yaml_version_directive_t *version_directive,
                                           yaml_tag_directive_t *tag_directives_start,
                                           yaml_tag_directive_t *tag_directives_end,
                                           int implicit);
    int (*document_end_event_initialize)(yaml_event_t *event, int implicit);
    int (*mapping_start_event_initialize)(yaml_event_t *event, const yaml_char_t *anchor,
                                          const yaml_char_t *tag, int implicit,
                                          yaml_mapping_style_t style);
    int (*mapping_end_event_initialize)(yaml_event_t *event);
    int (*sequence_start_event_initialize)(yaml_event_t *event, const yaml_char_t *anchor,
                                           const yaml_char_t *tag, int implicit,
                                           yaml_sequence_style_t style);
    int (*sequence_end_event_initialize)(yaml_event_t *event);
    int (*scalar_event_initialize)(yaml_event_t *event, const yaml_char_t *anchor,
                                   const yaml_char_t *tag, const yaml_char_t *value,
                                   int length, int plain_implicit, int quoted_implicit,
                                   yaml_scalar_style_t style);
} asbi_yaml_api;

/* Filled by asbi_yaml_load(); read-only afterwards. */
extern asbi_yaml_api asbi_yaml;

/* Loads libyaml once per process (thread-safe). Returns ASB_OK, or ASB_ERROR with the last
 * error set when the library cannot be loaded. */
int asbi_yaml_load(void);

#define yaml_parser_initialize asbi_yaml.parser_initialize
#define yaml_parser_set_input_string asbi_yaml.parser_set_input_string
#define yaml_parser_parse asbi_yaml.parser_parse
#define yaml_parser_delete asbi_yaml.parser_delete
#define yaml_event_delete asbi_yaml.event_delete
#define yaml_emitter_initialize asbi_yaml.emitter_initialize
#define yaml_emitter_set_output asbi_yaml.emitter_set_output
#define yaml_emitter_set_unicode asbi_yaml.emitter_set_unicode
#define yaml_emitter_set_width asbi_yaml.emitter_set_width
#define yaml_emitter_set_indent asbi_yaml.emitter_set_indent
#define yaml_emitter_emit asbi_yaml.emitter_emit
#define yaml_emitter_flush asbi_yaml.emitter_flush
#define yaml_emitter_delete asbi_yaml.emitter_delete
#define yaml_stream_start_event_initialize asbi_yaml.stream_start_event_initialize
#define yaml_stream_end_event_initialize asbi_yaml.stream_end_event_initialize
#define yaml_document_start_event_initialize asbi_yaml.document_start_event_initialize
#define yaml_document_end_event_initialize asbi_yaml.document_end_event_initialize
#define yaml_mapping_start_event_initialize asbi_yaml.mapping_start_event_initialize
#define yaml_mapping_end_event_initialize asbi_yaml.mapping_end_event_initialize
#define yaml_sequence_start_event_initialize asbi_yaml.sequence_start_event_initialize
#define yaml_sequence_end_event_initialize asbi_yaml.sequence_end_event_initialize
#define yaml_scalar_event_initialize asbi_yaml.scalar_event_initialize
