/* Parsers for command-line and query values, with Go's strconv semantics where clients rely on them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Go strconv.ParseBool: 1,t,T,TRUE,true,True,0,f,F,FALSE,false,False. 0 or -EINVAL. */
int parse_go_bool(const char *s, bool *ret);

/* Go strconv.ParseInt(s, 0, 64) as used by the flag package: optional sign, 0x/0o/0b/0 prefixes,
 * underscores only with a base prefix. 0, -EINVAL or -ERANGE. */
int parse_go_int(const char *s, int64_t *ret);
