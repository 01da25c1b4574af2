#include "shared/main-usage.h"

int main_usage_option(int opt, main_usage_fn *usage)
{
    if (opt == 'h') {
        usage(stdout);
        return 0;
    }
    return main_usage_error(usage);
}

int main_usage_error(main_usage_fn *usage)
{
    usage(stderr);
    return 2;
}
