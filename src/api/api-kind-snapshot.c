/* SandboxSnapshot (extensions.agents.x-k8s.io/v1beta1, our extension; docs/snapshots.md): the
 * table of its fields and printer columns. A snapshot is the captured writable state of one
 * Sandbox (its workspace and volumeClaimTemplates volumes); status records what a fork needs to
 * be built without the source: its pod template, volume claim templates, template and image. */
#include "api/api-kinds.h"

/* clang-format off */
static const api_field sandbox_ref_props[] = {
    API_FIELD_REF_NAME,
    {0},
};

static const api_field spec_props[] = {
    {.name = "sandboxRef", .type = API_TYPE_OBJECT, .required = true, .immutable = true,
     .description = "the Sandbox to capture, in the snapshot's namespace",
     .props = sandbox_ref_props},
    {0},
};

static const api_field source_props[] = {
    {.name = "sandbox", .type = API_TYPE_STRING, .description = "name of the captured Sandbox"},
    {.name = "sandboxUID", .type = API_TYPE_STRING},
    {.name = "template", .type = API_TYPE_STRING,
     .description = "the SandboxTemplate the Sandbox came from, when it came from one"},
    {.name = "image", .type = API_TYPE_STRING,
     .description = "the image of the Sandbox's first container (its root filesystem)"},
    API_FIELD_POD_TEMPLATE(false),
    API_FIELD_VOLUME_CLAIM_TEMPLATES(false),
    {0},
};

/* On a cluster (asb-controller --snapshots): one VolumeSnapshot per volume of the source. */
static const api_field volume_snapshot_props[] = {
    {.name = "volume", .type = API_TYPE_STRING, .description = "the volumeClaimTemplate's name"},
    {.name = "name", .type = API_TYPE_STRING,
     .description = "the snapshot.storage.k8s.io/v1 VolumeSnapshot"},
    {.name = "readyToUse", .type = API_TYPE_BOOLEAN},
    {.name = "restoreSize", .type = API_TYPE_STRING},
    {.name = "error", .type = API_TYPE_STRING},
    {0},
};
static const api_field volume_snapshot_item[] = {
    {.name = "item", .type = API_TYPE_OBJECT, .props = volume_snapshot_props}};

static const api_field status_props[] = {
    API_FIELD_CONDITIONS,
    {.name = "volumeSnapshots", .type = API_TYPE_ARRAY, .items = volume_snapshot_item,
     .description = "on a cluster: the VolumeSnapshots that hold the captured volumes"},
    {.name = "capturedAt", .type = API_TYPE_STRING, .format = "date-time"},
    {.name = "files", .type = API_TYPE_INTEGER, .format = "int64",
     .description = "entries captured: files, directories, symlinks"},
    {.name = "size", .type = API_TYPE_INTEGER, .format = "int64",
     .description = "bytes of file content captured (holes of sparse files excluded)"},
    {.name = "storedBytes", .type = API_TYPE_INTEGER, .format = "int64",
     .description = "compressed bytes this snapshot added to the store (the rest was shared)"},
    {.name = "pauseMicroseconds", .type = API_TYPE_INTEGER, .format = "int64",
     .description = "how long the source was frozen for the consistent part of the capture"},
    {.name = "source", .type = API_TYPE_OBJECT, .props = source_props},
    {0},
};

const api_column api_snapshot_columns[] = {
    API_COLUMN_READY,
    {.name = "Sandbox", .type = "string", .json_path = ".spec.sandboxRef.name", .crd = true},
    {.name = "Files", .type = "integer", .json_path = ".status.files", .crd = true},
    {.name = "Size", .type = "integer", .json_path = ".status.size", .crd = true},
    API_COLUMN_REASON,
    API_COLUMN_AGE_,
    {.name = "Image", .type = "string", .json_path = ".status.source.image", .wide = true},
    {.name = "Captured", .type = "date", .json_path = ".status.capturedAt", .wide = true},
    {0},
};

const api_field api_snapshot_spec[] = {
    {.name = "spec", .type = API_TYPE_OBJECT, .required = true, .props = spec_props}};
const api_field api_snapshot_status[] = {
    {.name = "status", .type = API_TYPE_OBJECT, .props = status_props}};
/* clang-format on */
