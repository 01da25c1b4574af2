/* asb_sandbox_open_local: a local server's Ready sandbox by name, from the names it keeps in its
 * state directory (SANDBOX_NAMES_DIR, basic/state-files.h), without an API request. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "basic/state-files.h"
#include "libasb/libasb-internal.h"
#include "libasb/libasb-sandbox-internal.h"

/* A name that is one path component of lowercase DNS characters: what the API allows for a
 * namespace and a Sandbox name; anything else is not looked up. */
static bool plain_name(const char *s)
{
    if (!s || !*s || *s == '.' || strlen(s) > 253)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
            return false;
    return true;
}

/* Something listens on the socket at path: sandboxd, or the socket asb serve made for it. */
static bool answers(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return false;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return false;
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

ASB_PUBLIC int asb_sandbox_open_local(asb_sandbox **out, asb_client *client, const char *ns,
                                      const char *name, const asb_sandbox_options *opts)
{
    if (!out || !client || !name || !*name)
        return asbi_error_set(ASB_EINVAL, 0, NULL,
                              "asb_sandbox_open_local: NULL out, client or name");
    *out = NULL;
    if (!ns || !*ns)
        ns = "default";
    if (!client->state_dir || !*client->state_dir || !client->state_dirs_server ||
        !plain_name(ns) || !plain_name(name))
        return asbi_error_set(ASB_ENOTFOUND, 0, NULL, "sandbox %s/%s: no local name", ns, name);
    char *link = NULL;
    if (asprintf(&link, "%s/" SANDBOX_NAMES_DIR "/%s/%s", client->state_dir, ns, name) < 0)
        return asbi_error_set(ASB_ENOMEM, 0, NULL, "out of memory");
    char target[512];
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    free(link);
    const size_t prefix = strlen(SANDBOX_NAMES_TARGET);
    if (n > (ssize_t)prefix)
        target[n] = '\0';
    if (n <= (ssize_t)prefix || strncmp(target, SANDBOX_NAMES_TARGET, prefix) != 0)
        return asbi_error_set(ASB_ENOTFOUND, 0, NULL, "sandbox %s/%s: no local name", ns, name);
    char *rest = NULL, *grpc = NULL;
    /* The uid's own paths: the handle stays with this Sandbox whatever the name does next. */
    int r = asbi_sandbox_socket_paths(client->state_dir, target + prefix, &rest, &grpc);
    if (r == ASB_OK && !answers(grpc))
        r = asbi_error_set(ASB_ENOTFOUND, 0, NULL, "sandbox %s/%s: not serving locally", ns, name);
    if (r == ASB_OK)
        r = asb_sandbox_open_sockets(out, rest, grpc, opts);
    free(rest);
    free(grpc);
    return r;
}
