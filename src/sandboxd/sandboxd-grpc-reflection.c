/* gRPC server reflection, grpc.reflection.v1 and v1alpha (identical messages on the wire):
 * list_services, file_by_filename, file_containing_symbol (serialized FileDescriptorProtos from
 * the embedded descriptor set, with their dependencies), error_response NOT_FOUND otherwise. */
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "reflection.pb-c.h"
#include "sandboxd/sandboxd-grpc-call.h"
#include "sandboxd/sandboxd-grpc-descriptors.h"

#define V1ALPHA_SERVICE "grpc.reflection.v1alpha.ServerReflection"

typedef struct service_list {
    Grpc__Reflection__V1__ServiceResponse items[16];
    Grpc__Reflection__V1__ServiceResponse *ptrs[16];
    char names[16][128];
    size_t n;
} service_list;

static void add_service(void *payload, const char *name)
{
    service_list *l = payload;
    if (l->n >= ELEMENTSOF(l->items))
        return;
    Grpc__Reflection__V1__ServiceResponse init = GRPC__REFLECTION__V1__SERVICE_RESPONSE__INIT;
    snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
    l->items[l->n] = init;
    l->items[l->n].name = l->names[l->n];
    l->ptrs[l->n] = &l->items[l->n];
    l->n++;
}

static void set_error(Grpc__Reflection__V1__ServerReflectionResponse *resp,
                      Grpc__Reflection__V1__ErrorResponse *err, int code, const char *msg)
{
    err->error_code = code;
    err->error_message = (char *)msg;
    resp->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
    resp->error_response = err;
}

static void reflection_on_message(grpc_call *c, const uint8_t *msg, size_t len)
{
    Grpc__Reflection__V1__ServerReflectionRequest *req =
        grpc__reflection__v1__server_reflection_request__unpack(NULL, len, msg);
    if (!req) {
        grpc_call_finish(c, STATUS_INTERNAL, "grpc: error unmarshalling request");
        return;
    }
    desc_files files;
    desc_files_parse(&files, asb_proto_descriptor_set, asb_proto_descriptor_set_len);

    Grpc__Reflection__V1__ServerReflectionResponse resp =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__INIT;
    Grpc__Reflection__V1__ErrorResponse err = GRPC__REFLECTION__V1__ERROR_RESPONSE__INIT;
    Grpc__Reflection__V1__ListServiceResponse list =
        GRPC__REFLECTION__V1__LIST_SERVICE_RESPONSE__INIT;
    Grpc__Reflection__V1__FileDescriptorResponse fdr =
        GRPC__REFLECTION__V1__FILE_DESCRIPTOR_RESPONSE__INIT;
    Grpc__Reflection__V1__ExtensionNumberResponse ext =
        GRPC__REFLECTION__V1__EXTENSION_NUMBER_RESPONSE__INIT;
    service_list services = {.n = 0};
    ProtobufCBinaryData blobs[DESC_MAX_FILES];
    int idx[DESC_MAX_FILES];
    size_t nidx = 0;
    _cleanup_free_ char *msgbuf = NULL;

    resp.valid_host = req->host;
    resp.original_request = req;
    int found = -1;
    switch (req->message_request_case) {
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES:
        desc_each_service(&files, add_service, &services); /* v1alpha: proto/reflection_v1alpha.proto */
        list.n_service = services.n;
        list.service = services.ptrs;
        resp.message_response_case =
            GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
        resp.list_services_response = &list;
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME:
        found = desc_find_file(&files, req->file_by_filename);
        if (found < 0 && asprintf(&msgbuf, "file not found: %s", req->file_by_filename) < 0)
            msgbuf = NULL;
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL:
        found = desc_find_symbol(&files, req->file_containing_symbol);
        if (found < 0 &&
            asprintf(&msgbuf, "symbol not found: %s", req->file_containing_symbol) < 0)
            msgbuf = NULL;
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE:
        if (desc_is_message(&files, req->all_extension_numbers_of_type)) {
            ext.base_type_name = req->all_extension_numbers_of_type;
            resp.message_response_case =
                GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE;
            resp.all_extension_numbers_response = &ext;
        } else {
            set_error(&resp, &err, STATUS_NOT_FOUND, "type not found");
        }
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_EXTENSION:
        set_error(&resp, &err, STATUS_NOT_FOUND, "extension not found");
        break;
    default:
        set_error(&resp, &err, STATUS_INVALID_ARGUMENT, "no reflection request set");
        break;
    }
    if (found >= 0) {
        desc_with_deps(&files, found, idx, &nidx);
        for (size_t i = 0; i < nidx; i++)
            blobs[i] = (ProtobufCBinaryData){files.file[idx[i]].len,
                                             (uint8_t *)files.file[idx[i]].data};
        fdr.n_file_descriptor_proto = nidx;
        fdr.file_descriptor_proto = blobs;
        resp.message_response_case =
            GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
        resp.file_descriptor_response = &fdr;
    } else if (resp.message_response_case ==
               GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE__NOT_SET) {
        set_error(&resp, &err, STATUS_NOT_FOUND, msgbuf ? msgbuf : "not found");
    }
    if (grpc_call_send(c, &resp.base) < 0)
        grpc_call_finish(c, STATUS_INTERNAL, "failed to send reflection response");
    grpc__reflection__v1__server_reflection_request__free_unpacked(req, NULL);
}

static void reflection_on_half_close(grpc_call *c)
{
    grpc_call_finish(c, STATUS_OK, NULL);
}

const grpc_method grpc_reflection_methods[] = {
    {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", true, reflection_on_message,
     reflection_on_half_close, NULL, NULL},
    {"/" V1ALPHA_SERVICE "/ServerReflectionInfo", true, reflection_on_message,
     reflection_on_half_close, NULL, NULL},
};
const size_t grpc_reflection_methods_count = ELEMENTSOF(grpc_reflection_methods);
