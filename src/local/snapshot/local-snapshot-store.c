/* The content-addressed object store of snapshots (local-snapshot-store.h): SHA-256 names
 * (libcrypto), zstd compression (libzstd), temp file + rename for every write. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "basic/buf.h"
#include "basic/fs-util.h"
#include "basic/io-util.h"
#include "basic/macro.h"
#include "basic/random-util.h"
#include "local/snapshot/local-snapshot-store.h"

#define ZSTD_LEVEL 3
#define IO_CHUNK (256 * 1024)

struct snap_store {
    char *dir;
    int objects_fd, tmp_fd, manifests_fd; /* directory fds */
    /* Kept from one object to the next: a compression context and 256 KiB buffers made per
     * file would cost more than compressing a small file (page faults of fresh mappings). */
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    EVP_MD_CTX *md;
    char *in, *out;
};

snap_store *snap_store_free(snap_store *s)
{
    if (!s)
        return NULL;
    if (s->objects_fd >= 0)
        close(s->objects_fd);
    if (s->tmp_fd >= 0)
        close(s->tmp_fd);
    if (s->manifests_fd >= 0)
        close(s->manifests_fd);
    ZSTD_freeCCtx(s->cctx);
    ZSTD_freeDCtx(s->dctx);
    EVP_MD_CTX_free(s->md);
    free(s->in);
    free(s->out);
    free(s->dir);
    free(s);
    return NULL;
}

static int open_dir(const char *base, const char *sub, int *ret)
{
    _cleanup_free_ char *p = strdup_printf("%s/%s", base, sub);
    if (!p)
        return -ENOMEM;
    int k = mkdir_p(p, 0700);
    if (k < 0)
        return k;
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    *ret = fd;
    return 0;
}

int snap_store_open(const char *dir, snap_store **ret)
{
    snap_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->objects_fd = s->tmp_fd = s->manifests_fd = -1;
    s->cctx = ZSTD_createCCtx();
    s->dctx = ZSTD_createDCtx();
    s->md = EVP_MD_CTX_new();
    s->in = malloc(IO_CHUNK);
    s->out = malloc(IO_CHUNK);
    int k = (s->dir = strdup(dir)) && s->cctx && s->dctx && s->md && s->in && s->out ? 0 : -ENOMEM;
    if (k == 0)
        k = open_dir(dir, "objects", &s->objects_fd);
    if (k == 0)
        k = open_dir(dir, "objects/tmp", &s->tmp_fd);
    if (k == 0)
        k = open_dir(dir, "manifests", &s->manifests_fd);
    if (k < 0) {
        snap_store_free(s);
        return k;
    }
    *ret = s;
    return 0;
}

const char *snap_store_dir(const snap_store *s)
{
    return s->dir;
}

int snap_hash_valid(const char *hex)
{
    if (!hex || strlen(hex) != SNAP_HASH_HEX)
        return 0;
    for (const char *c = hex; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return 0;
    return 1;
}

static void hex_of(const unsigned char *md, char out[SNAP_HASH_HEX + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < SNAP_HASH_HEX / 2; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[SNAP_HASH_HEX] = 0;
}

/* A temporary file in objects/tmp; *ret_name (owned) is its name there. */
static int tmp_create(snap_store *s, char **ret_name)
{
    uint64_t r = 0;
    int k = random_bytes(&r, sizeof(r));
    if (k < 0)
        return k;
    char *name = strdup_printf("%016llx.%d", (unsigned long long)r, (int)getpid());
    if (!name)
        return -ENOMEM;
    int fd = openat(s->tmp_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        free(name);
        return -errno;
    }
    *ret_name = name;
    return fd;
}

/* Compresses in[0, n) (end: finish the frame) into fd. */
static int compress_chunk(ZSTD_CCtx *cctx, char *out, int fd, const void *in, size_t n, int end,
                          uint64_t *stored)
{
    ZSTD_inBuffer ib = {in, n, 0};
    for (;;) {
        ZSTD_outBuffer ob = {out, IO_CHUNK, 0};
        size_t left = ZSTD_compressStream2(cctx, &ob, &ib, end ? ZSTD_e_end : ZSTD_e_continue);
        if (ZSTD_isError(left))
            return -EIO;
        if (ob.pos > 0) {
            int k = loop_write(fd, out, ob.pos);
            if (k < 0)
                return k;
            *stored += ob.pos;
        }
        if (end ? left == 0 : ib.pos == ib.size)
            return 0;
    }
}

static int object_path(const char *hex, char path[SNAP_HASH_HEX + 4])
{
    snprintf(path, SNAP_HASH_HEX + 4, "%.2s/%s", hex, hex);
    return 0;
}

/* Names the finished temporary object `tmp` hex: renamed into place, or dropped when the
 * object exists already (deduplicated: *ret_stored 0). */
static int publish(snap_store *s, const char *tmp, const char *hex, uint64_t stored,
                   uint64_t *ret_stored)
{
    char path[SNAP_HASH_HEX + 4], sub[3] = {hex[0], hex[1], 0};
    object_path(hex, path);
    struct stat st;
    if (fstatat(s->objects_fd, path, &st, 0) == 0) {
        unlinkat(s->tmp_fd, tmp, 0);
        *ret_stored = 0;
        return 0;
    }
    int k = mkdirat(s->objects_fd, sub, 0700) < 0 && errno != EEXIST ? -errno : 0;
    /* No fsync per object: a crash loses at most snapshots whose manifest was not written yet,
     * and the manifest is written after every object it names. */
    if (k == 0 && renameat(s->tmp_fd, tmp, s->objects_fd, path) < 0)
        k = -errno;
    if (k < 0) {
        unlinkat(s->tmp_fd, tmp, 0);
        return k;
    }
    *ret_stored = stored;
    return 0;
}

static int object_exists(snap_store *s, const char *hex)
{
    char path[SNAP_HASH_HEX + 4];
    object_path(hex, path);
    struct stat st;
    return fstatat(s->objects_fd, path, &st, 0) == 0;
}

/* Reads the extents' next bytes into `into` (at most cap); (*ei, *eoff) is the position. */
static ssize_t read_next(int fd, const uint64_t *extents, size_t n, size_t *ei, uint64_t *eoff,
                         char *into, size_t cap)
{
    while (*ei < n && *eoff == extents[2 * *ei + 1]) {
        (*ei)++;
        *eoff = 0;
    }
    if (*ei >= n)
        return 0;
    uint64_t left = extents[2 * *ei + 1] - *eoff;
    ssize_t r;
    do
        r = pread(fd, into, MIN(left, (uint64_t)cap), (off_t)(extents[2 * *ei] + *eoff));
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    if (r == 0)
        return -EIO; /* shrank under us */
    *eoff += (uint64_t)r;
    return r;
}

int snap_store_put(snap_store *s, int fd, const uint64_t *extents, size_t n, uint64_t len,
                   char ret_hex[SNAP_HASH_HEX + 1], uint64_t *ret_stored)
{
    EVP_MD_CTX *md = s->md;
    ZSTD_CCtx *cctx = s->cctx;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    uint64_t stored = 0, total = 0, whole[2] = {0, len}, eoff = 0;
    size_t ei = 0;
    if (!extents) {
        extents = whole;
        n = len > 0 ? 1 : 0;
    }
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        return -ENOMEM;
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL);
    /* The size is known: zstd sizes its tables to it instead of clearing a window's worth of
     * them for every small file (5,000 files: seconds of memset). */
    ZSTD_CCtx_setPledgedSrcSize(cctx, len);
    /* Data that fits the buffer is hashed before anything is written: content the store holds
     * already costs no temporary file at all. */
    size_t small = 0;
    if (len <= IO_CHUNK) {
        while (small < len) {
            ssize_t r = read_next(fd, extents, n, &ei, &eoff, s->in + small, IO_CHUNK - small);
            if (r <= 0)
                return r < 0 ? (int)r : -EIO;
            small += (size_t)r;
        }
        if (EVP_DigestUpdate(md, s->in, small) != 1 || EVP_DigestFinal_ex(md, digest, &dlen) != 1)
            return -ENOMEM;
        hex_of(digest, ret_hex);
        if (object_exists(s, ret_hex)) {
            *ret_stored = 0;
            return 0;
        }
    }
    _cleanup_free_ char *tmp = NULL;
    _cleanup_close_ int out = tmp_create(s, &tmp);
    if (out < 0)
        return out;
    int k = 0;
    if (len <= IO_CHUNK)
        k = compress_chunk(cctx, s->out, out, s->in, small, 1, &stored);
    else {
        for (;;) {
            ssize_t r = read_next(fd, extents, n, &ei, &eoff, s->in, IO_CHUNK);
            if (r <= 0) {
                k = (int)r;
                break;
            }
            total += (uint64_t)r;
            if (EVP_DigestUpdate(md, s->in, (size_t)r) != 1)
                k = -ENOMEM;
            else
                k = compress_chunk(cctx, s->out, out, s->in, (size_t)r, 0, &stored);
            if (k < 0)
                break;
        }
        if (k == 0 && total != len)
            k = -EIO;
        if (k == 0)
            k = compress_chunk(cctx, s->out, out, NULL, 0, 1, &stored);
        if (k == 0 && EVP_DigestFinal_ex(md, digest, &dlen) != 1)
            k = -ENOMEM;
        if (k == 0)
            hex_of(digest, ret_hex);
    }
    if (k < 0) {
        unlinkat(s->tmp_fd, tmp, 0);
        return k;
    }
    return publish(s, tmp, ret_hex, stored, ret_stored);
}

/* Writes decompressed bytes to fd at the current extent position. */
typedef struct extent_writer {
    int fd;
    const uint64_t *extents;
    size_t n, i;
    uint64_t done_in_extent, total;
} extent_writer;

static int extent_write(extent_writer *w, const char *p, size_t len)
{
    while (len > 0) {
        if (w->i >= w->n)
            return -EBADMSG; /* more data than the extents hold */
        uint64_t room = w->extents[2 * w->i + 1] - w->done_in_extent;
        size_t now = (size_t)MIN((uint64_t)len, room);
        off_t at = (off_t)(w->extents[2 * w->i] + w->done_in_extent);
        size_t off = 0;
        while (off < now) {
            ssize_t r = pwrite(w->fd, p + off, now - off, at + (off_t)off);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return -errno;
            off += (size_t)r;
        }
        p += now;
        len -= now;
        w->total += now;
        w->done_in_extent += now;
        if (w->done_in_extent == w->extents[2 * w->i + 1]) {
            w->i++;
            w->done_in_extent = 0;
        }
    }
    return 0;
}

int snap_store_get(snap_store *s, const char *hex, int fd, const uint64_t *extents, size_t n,
                   uint64_t len)
{
    if (!snap_hash_valid(hex))
        return -EBADMSG;
    char path[SNAP_HASH_HEX + 4];
    object_path(hex, path);
    _cleanup_close_ int in = openat(s->objects_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0)
        return errno == ENOENT ? -ENOENT : -errno;
    EVP_MD_CTX *md = s->md;
    ZSTD_DCtx *dctx = s->dctx;
    char *ib = s->in, *obuf = s->out;
    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        return -ENOMEM;
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
    uint64_t whole[2] = {0, len};
    if (!extents) {
        extents = whole;
        n = len > 0 ? 1 : 0;
    }
    extent_writer w = {.fd = fd, .extents = extents, .n = n};
    size_t last = 0;
    for (;;) {
        ssize_t r = read(in, ib, IO_CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        ZSTD_inBuffer zi = {ib, (size_t)r, 0};
        while (zi.pos < zi.size) {
            ZSTD_outBuffer zo = {obuf, IO_CHUNK, 0};
            last = ZSTD_decompressStream(dctx, &zo, &zi);
            if (ZSTD_isError(last))
                return -EBADMSG;
            if (EVP_DigestUpdate(md, obuf, zo.pos) != 1)
                return -ENOMEM;
            int k = extent_write(&w, obuf, zo.pos);
            if (k < 0)
                return k;
        }
    }
    /* last != 0: the frame is truncated. Then the length and the name must match. */
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    char got[SNAP_HASH_HEX + 1];
    if (EVP_DigestFinal_ex(md, digest, &dlen) != 1)
        return -ENOMEM;
    hex_of(digest, got);
    if (last != 0 || w.total != len || strcmp(got, hex) != 0)
        return -EBADMSG;
    return 0;
}

/* ---- manifests ---- */

static int manifest_name(const char *uid, char **ret)
{
    /* A uid is a name in one directory: no separators, nothing hidden. */
    if (!uid || !*uid || strchr(uid, '/') || uid[0] == '.' || strlen(uid) > 128)
        return -EINVAL;
    *ret = strdup_printf("%s.json", uid);
    return *ret ? 0 : -ENOMEM;
}

int snap_store_save_manifest(snap_store *s, const char *uid, const json_t *manifest)
{
    _cleanup_free_ char *name = NULL, *tmp = NULL, *text = NULL;
    int k = manifest_name(uid, &name);
    if (k < 0)
        return k;
    if (!(text = json_dumps(manifest, JSON_COMPACT)) || !(tmp = strdup_printf("%s.tmp", name)))
        return -ENOMEM;
    _cleanup_close_ int fd =
        openat(s->manifests_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    /* Objects are not fsynced one by one (5,000 fsyncs per snapshot): after a crash an object
     * may be short, which snap_store_get detects (length and hash) instead of restoring it. */
    if ((k = loop_write(fd, text, strlen(text))) < 0 || (fsync(fd) < 0 && (k = -errno)) ||
        (renameat(s->manifests_fd, tmp, s->manifests_fd, name) < 0 && (k = -errno))) {
        unlinkat(s->manifests_fd, tmp, 0);
        return k;
    }
    return 0;
}

int snap_store_load_manifest(snap_store *s, const char *uid, json_t **ret)
{
    _cleanup_free_ char *name = NULL;
    int k = manifest_name(uid, &name);
    if (k < 0)
        return k;
    _cleanup_close_ int fd = openat(s->manifests_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    _cleanup_buf_ buf b = BUF_INIT;
    if ((k = buf_append_fd(&b, fd)) < 0)
        return k;
    json_t *j = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
    if (!j)
        return -EBADMSG;
    *ret = j;
    return 0;
}

int snap_store_remove_manifest(snap_store *s, const char *uid)
{
    _cleanup_free_ char *name = NULL;
    int k = manifest_name(uid, &name);
    if (k < 0)
        return k;
    if (unlinkat(s->manifests_fd, name, 0) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

/* A directory stream over a duplicate of a held fd, from its start (duplicates share the offset,
 * so an earlier listing would otherwise leave it at the end). */
static DIR *list_fd(int fd)
{
    int d = dup(fd);
    if (d < 0)
        return NULL;
    DIR *dir = fdopendir(d);
    if (!dir) {
        close(d);
        return NULL;
    }
    rewinddir(dir);
    return dir;
}

/* Every object name a manifest's entries carry, into the set `live` (keys). */
static int mark_live(const json_t *manifest, json_t *live)
{
    const json_t *root, *e;
    size_t i, j;
    json_array_foreach (json_object_get(manifest, "roots"), i, root)
        json_array_foreach (json_object_get(root, "entries"), j, e) {
            const char *h = json_string_value(json_object_get(e, "object"));
            if (h && json_object_set_new(live, h, json_true()) < 0)
                return -ENOMEM;
        }
    return 0;
}

static int sweep_objects(snap_store *s, const json_t *live, size_t *removed)
{
    _cleanup_closedir_ DIR *top = list_fd(s->objects_fd);
    if (!top)
        return -errno;
    struct dirent *d;
    while ((d = readdir(top))) {
        if (strlen(d->d_name) != 2 || d->d_name[0] == '.')
            continue;
        int sfd = openat(s->objects_fd, d->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0)
            continue;
        _cleanup_closedir_ DIR *sub = fdopendir(sfd);
        if (!sub) {
            close(sfd);
            continue;
        }
        struct dirent *o;
        while ((o = readdir(sub)))
            if (o->d_name[0] != '.' && !json_object_get(live, o->d_name) &&
                unlinkat(sfd, o->d_name, 0) == 0)
                (*removed)++;
    }
    /* Temporary files: a capture runs on the same thread as gc, so none is in use now. */
    _cleanup_closedir_ DIR *tmp = list_fd(s->tmp_fd);
    while (tmp && (d = readdir(tmp)))
        if (d->d_name[0] != '.')
            unlinkat(s->tmp_fd, d->d_name, 0);
    return 0;
}

int snap_store_gc(snap_store *s, int (*keep)(const char *uid, void *payload), void *payload,
                  size_t *ret_removed)
{
    _cleanup_(json_decrefp) json_t *live = json_object();
    if (!live)
        return -ENOMEM;
    _cleanup_closedir_ DIR *md = list_fd(s->manifests_fd);
    if (!md)
        return -errno;
    struct dirent *d;
    int k = 0;
    while (k == 0 && (d = readdir(md))) {
        size_t n = strlen(d->d_name);
        if (d->d_name[0] == '.' || n < 6 || strcmp(d->d_name + n - 5, ".json") != 0)
            continue;
        _cleanup_free_ char *uid = strndup(d->d_name, n - 5);
        if (!uid)
            return -ENOMEM;
        if (keep && !keep(uid, payload)) {
            snap_store_remove_manifest(s, uid);
            continue;
        }
        _cleanup_(json_decrefp) json_t *m = NULL;
        int r = snap_store_load_manifest(s, uid, &m);
        if (r == -EBADMSG)
            return r; /* an unreadable manifest: keep every object rather than guess */
        if (r == 0)
            k = mark_live(m, live);
    }
    if (k < 0)
        return k;
    size_t removed = 0;
    k = sweep_objects(s, live, &removed);
    if (ret_removed)
        *ret_removed = removed;
    return k;
}
