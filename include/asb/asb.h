/* libasb umbrella header: `#include <asb/asb.h>` and link with `pkg-config --libs libasb`. */
#ifndef ASB_H
#define ASB_H

#include "asb/common.h"
#include "asb/errors.h"
#include "asb/kind.h"
#include "asb/manifest.h"
#include "asb/client.h"
#include "asb/sandbox.h"
#include "asb/handle.h"
#include "asb/claim.h"
#include "asb/snapshot.h"

#endif
