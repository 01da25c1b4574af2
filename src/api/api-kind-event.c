/* Event (events.k8s.io/v1): what the controllers of `asb serve` did and why. Not one of the
 * agents.x-k8s.io kinds (no CRD, no spec): the API server serves it read-only under
 * /apis/events.k8s.io/v1 and the recorder (src/local/store/local-events.c) writes it to the store. */
#include "api/api.h"
#include "api/api-kinds.h"

/* clang-format off */
static const api_column event_columns[] = {
    {.name = "Type", .type = "string", .json_path = ".type"},
    {.name = "Reason", .type = "string", .json_path = ".reason"},
    {.name = "Object", .type = "string", .value = API_COLUMN_REGARDING},
    {.name = "Note", .type = "string", .json_path = ".note"},
    API_COLUMN_AGE_,
    {.name = "Action", .type = "string", .json_path = ".action", .wide = true},
    {.name = "Controller", .type = "string", .json_path = ".reportingController", .wide = true},
    {0},
};

const api_kind api_event_kind = {
    .kind = "Event",
    .list_kind = "EventList",
    .plural = "events",
    .singular = "event",
    .group = API_GROUP_EVENTS,
    .api_version = API_GROUP_EVENTS "/" API_VERSION_EVENTS,
    .short_names = {"ev", NULL},
    .aliases = {NULL, NULL, NULL},
    .columns = event_columns,
};
/* clang-format on */
