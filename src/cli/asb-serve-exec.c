/* `asb serve`: execs the server binary (asb-server, src/server/asb-server-main.c) in place of this
 * process, so the pid, the signals, the serve.lock and the exit code are the server's own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/macro.h"
#include "cli/asb.h"

#define SERVER_BINARY "asb-server"

/* $ASB_SERVER_BINARY, else asb-server next to asb (build/bin, /usr/bin), else the libexec
 * directory of the installation (<prefix>/libexec/asb/asb-server). Owned; NULL: not found. */
static char *server_binary(void)
{
    const char *e = getenv("ASB_SERVER_BINARY");
    if (e && *e)
        return strdup(e);
    _cleanup_free_ char *dir = NULL;
    if (self_exe_dir(&dir) < 0)
        return NULL;
    static const char *const candidates[] = {SERVER_BINARY, "../libexec/asb/" SERVER_BINARY};
    for (size_t i = 0; i < ELEMENTSOF(candidates); i++) {
        char *p = NULL;
        if (asprintf(&p, "%s/%s", dir, candidates[i]) < 0)
            return NULL;
        if (access(p, X_OK) == 0)
            return p;
        free(p);
    }
    return NULL;
}

int asb_serve_exec(int argc, char **argv)
{
    _cleanup_free_ char *bin = server_binary();
    if (!bin) {
        fprintf(stderr, "asb serve: cannot find " SERVER_BINARY " next to asb or in "
                        "../libexec/asb (set ASB_SERVER_BINARY)\n");
        return 1;
    }
    /* argv[0] is the verb; the server sees its own path there and the flags after it. */
    argv[0] = bin;
    execv(bin, argv);
    fprintf(stderr, "asb serve: exec %s: %s\n", bin, strerror(errno));
    return 1;
}
