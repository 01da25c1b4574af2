/* The usage handling every getopt-based main repeats: --help prints the usage on stdout and
 * exits 0; a bad option, a missing argument or a wrong number of operands prints it on stderr
 * and exits 2. Messages are the caller's usage text only, unchanged. */
#pragma once

#include <stdio.h>

/* Prints a program's usage text to f. */
typedef void main_usage_fn(FILE *f);

/* For the `default:` of a getopt_long switch: opt is what getopt returned. 'h' (--help):
 * usage on stdout, returns 0; anything else ('?', ':'): usage on stderr, returns 2. The caller
 * returns the result from main. */
int main_usage_option(int opt, main_usage_fn *usage);
/* For a usage error found after the options: usage on stderr, returns 2. */
int main_usage_error(main_usage_fn *usage);
