/* Parsers for command-line and query values, with Go's strconv semantics where clients rely on them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Go strconv.ParseBool: 1,t,T,TRUE,true,True,0,f,F,FALSE,false,False. 0 or -EINVAL. */
int parse_go_bool(const char *s, bool *ret);

/* A Kubernetes resource quantity as k8s.io/apimachinery's resource.Quantity reads one: an
 * optional sign, a decimal number ("1", "0.5", ".5"), then nothing, a binary suffix (Ki Mi Gi
 * Ti Pi Ei), a decimal one (n u m k M G T P E) or an exponent (e3, E-2). *ret its value. 0 or
 * -EINVAL (anything else: "lots", "1 Gi", "1GB", "inf", "0x10", ""). */
int parse_quantity(const char *s, long double *ret);

/* Go strconv.ParseInt(s, 0, 64) as used by the flag package: optional sign, 0x/0o/0b/0 prefixes,
 * underscores only with a base prefix. 0, -EINVAL or -ERANGE. */
int parse_go_int(const char *s, int64_t *ret);
