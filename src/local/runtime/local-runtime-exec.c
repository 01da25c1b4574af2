/* The sealed exec image of the OCI runtime binary. See local-runtime-exec.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/macro.h"
#include "local/runtime/local-runtime-exec.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

/* Exactly the seals runc 1.1 checks for (it compares with ==, so no other seal is added). */
#define RUNC_MEMFD_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

typedef struct exec_image {
    char *path; /* the resolved binary */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int fd;
} exec_image;

static pthread_mutex_t images_lock = PTHREAD_MUTEX_INITIALIZER;
/* Never shrinks and an image's fd is never closed: another thread may be between fork and
 * exec with it. A changed binary on disk gets a new entry; the old memfd stays (rare). */
static exec_image *images;
static size_t n_images;

/* binary as a path: itself when it has a '/', else its first executable match in $PATH. Owned. */
static char *resolve(const char *binary)
{
    if (strchr(binary, '/'))
        return strdup(binary);
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char *c = NULL;
        if (n > 0 && asprintf(&c, "%.*s/%s", (int)n, p, binary) < 0)
            return NULL;
        if (c && access(c, X_OK) == 0)
            return c;
        free(c);
        p += n + (p[n] == ':');
    }
    return NULL;
}

static bool same_file(const exec_image *im, const char *path, const struct stat *st)
{
    return strcmp(im->path, path) == 0 && im->dev == st->st_dev && im->ino == st->st_ino &&
           im->size == st->st_size && im->mtime.tv_sec == st->st_mtim.tv_sec &&
           im->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* A sealed memfd with the contents of the open file src (size bytes), or a negative errno. */
static int sealed_copy(int src, off_t size)
{
    int fd = memfd_create("runc", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
    if (fd < 0 && errno == EINVAL) /* kernels before 6.3 know no MFD_EXEC (exec is the default) */
        fd = memfd_create("runc", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    _cleanup_close_ int m = fd;
    off_t off = 0;
    while (off < size) {
        ssize_t n = sendfile(m, src, &off, (size_t)(size - off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
    }
    if (fcntl(m, F_ADD_SEALS, RUNC_MEMFD_SEALS) < 0)
        return -errno;
    /* Above the fds a spawn moves into place (0..6), so that none of them replaces it. */
    int high = fcntl(m, F_DUPFD_CLOEXEC, 10);
    return high < 0 ? -errno : high;
}

int local_runtime_exec_fd(const char *binary)
{
    _cleanup_free_ char *path = resolve(binary);
    if (!path)
        return -1;
    _cleanup_close_ int src = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (src < 0 || fstat(src, &st) < 0 || !S_ISREG(st.st_mode))
        return -1;
    pthread_mutex_lock(&images_lock);
    int fd = -1;
    for (size_t i = n_images; i-- > 0;)
        if (same_file(&images[i], path, &st)) {
            fd = images[i].fd;
            break;
        }
    if (fd < 0) {
        exec_image *v = realloc(images, (n_images + 1) * sizeof(*v));
        if (v) {
            images = v;
            int m = sealed_copy(src, st.st_size);
            if (m >= 0) {
                images[n_images++] = (exec_image){.path = TAKE_PTR(path),
                                                  .dev = st.st_dev,
                                                  .ino = st.st_ino,
                                                  .size = st.st_size,
                                                  .mtime = st.st_mtim,
                                                  .fd = m};
                fd = m;
            }
        }
    }
    pthread_mutex_unlock(&images_lock);
    return fd;
}
