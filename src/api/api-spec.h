/* Per-kind spec validators and defaulters (api-validate.c), used by the kind table (api-object.c). */
#pragma once

#include <jansson.h>

#include "api/api.h"

void api_validate_sandbox_spec(const json_t *spec, const json_t *old, api_errors *errs);
void api_validate_template_spec(const json_t *spec, const json_t *old, api_errors *errs);
void api_validate_warmpool_spec(const json_t *spec, const json_t *old, api_errors *errs);
void api_validate_claim_spec(const json_t *spec, const json_t *old, api_errors *errs);
void api_default_sandbox_spec(json_t *spec);
void api_default_template_spec(json_t *spec);
void api_default_warmpool_spec(json_t *spec);
void api_default_claim_spec(json_t *spec);
