/* The objects a verb acts on, named as kubectl names them: `KIND NAME...`, `KIND/NAME...`, or one
 * KIND with --all or -l SELECTOR (label, annotate, patch, scale, wait). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "asb/asb.h"

typedef struct cli_target {
    const asb_kind *kind; /* static */
    char *name;           /* owned */
} cli_target;

typedef struct cli_targets {
    cli_target *v;
    size_t n;
    const asb_kind *kind; /* the KIND of --all / -l (their names are listed later); else NULL */
    bool failed;          /* for the verb: an object failed (the others were still done) */
} cli_targets;

/* Reads the operands args[0..n) in one of the forms above (--all and -l take one KIND and no
 * names). Prints kubectl's message for a bad form (naming the form, e.g. `arguments in
 * resource/name form must have a single resource and name`) and returns 1; 0 on success. */
int cli_targets_parse(cli_targets *ret, char **args, size_t n, bool all, const char *selector);

/* For --all / -l: appends the names of t->kind's objects in the namespace that the selector
 * (NULL: every object) matches. Prints the error and returns 1; 0 on success. */
int cli_targets_list(cli_targets *t, asb_client *cl, const char *selector);

void cli_targets_done(cli_targets *t);
