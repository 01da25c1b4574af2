/* User namespace id ranges of local sandboxes. See local-idmap.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/fs-util.h"
#include "basic/buf.h"
#include "basic/macro.h"
#include "local/fs/local-fs.h"
#include "local/container/local-idmap.h"

typedef struct idmap_slot {
    char *uid;      /* the Sandbox's metadata.uid */
    uint32_t start; /* first host id */
} idmap_slot;

struct local_idmap {
    uint32_t start, count;
    char *state_dir; /* canonical */
    char *slots_dir; /* $ASB_STATE_DIR/userns/sandboxes */
    char *registry;
    idmap_slot *slots;
    size_t n_slots;
    /* The slots are taken by the reconciler thread and released by teardown workers too. */
    pthread_mutex_t lock;
};

/* [a, a + an) and [b, b + bn) share an id (64-bit: a + an may be 2^32). */
static bool overlaps(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
    return a < b + bn && b < a + an;
}

static int failf(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int failf(char **ret_error, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(ret_error, fmt, ap) < 0)
        *ret_error = NULL;
    va_end(ap);
    return r;
}

static int parse_u32(const char *s, size_t n, uint64_t *ret)
{
    char text[32];
    if (n == 0 || n >= sizeof(text))
        return -EINVAL;
    memcpy(text, s, n);
    text[n] = '\0';
    if (text[0] == '-' || text[0] == '+')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || !end || *end || v > UINT32_MAX)
        return -EINVAL;
    *ret = v;
    return 0;
}

int local_idmap_parse_range(const char *s, uint32_t *ret_start, uint32_t *ret_count)
{
    const char *colon = s ? strchr(s, ':') : NULL;
    uint64_t start, count;
    if (!colon || parse_u32(s, (size_t)(colon - s), &start) < 0 ||
        parse_u32(colon + 1, strlen(colon + 1), &count) < 0)
        return -EINVAL;
    if (count < LOCAL_IDMAP_SLOT || count % LOCAL_IDMAP_SLOT || start == 0 ||
        start + count > (uint64_t)UINT32_MAX) /* never 2^32 - 1, the invalid id */
        return -EINVAL;
    *ret_start = (uint32_t)start;
    *ret_count = (uint32_t)count;
    return 0;
}

/* The first host account (passwd uid, group gid, subuid/subgid range) sharing an id with
 * [start, start + count): 1 with *ret_what ("/etc/passwd: user x (uid 1000)") owned, or 0. */
static int host_account_overlap(uint64_t start, uint64_t count, char **ret_what)
{
    static const struct {
        const char *path;
        int field;     /* 0-based field holding the id (range start for sub-ids) */
        bool is_range; /* the next field is a count */
    } files[] = {
        {"/etc/passwd", 2, false},
        {"/etc/group", 2, false},
        {"/etc/subuid", 1, true},
        {"/etc/subgid", 1, true},
    };
    *ret_what = NULL;
    for (size_t i = 0; i < ELEMENTSOF(files); i++) {
        _cleanup_fclose_ FILE *f = fopen(files[i].path, "re");
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        while (f && getline(&line, &cap, f) > 0) {
            line[strcspn(line, "\n")] = '\0';
            const char *fields[4] = {line};
            size_t nf = 1;
            for (char *p = line; *p && nf < ELEMENTSOF(fields); p++)
                if (*p == ':') {
                    *p = '\0';
                    fields[nf++] = p + 1;
                }
            int want = files[i].field + (files[i].is_range ? 1 : 0);
            uint64_t id, n = 1;
            if ((int)nf <= want ||
                parse_u32(fields[files[i].field], strlen(fields[files[i].field]), &id) < 0)
                continue;
            if (files[i].is_range && parse_u32(fields[want], strlen(fields[want]), &n) < 0)
                continue;
            if (!overlaps(start, count, id, n))
                continue;
            if (asprintf(ret_what, "%s: %s (%s %" PRIu64 "%s%" PRIu64 ")", files[i].path, fields[0],
                         files[i].is_range ? "ids" : "id", id, files[i].is_range ? " count " : "",
                         files[i].is_range ? n : id) < 0)
                *ret_what = NULL;
            return 1;
        }
    }
    return 0;
}

/* Field 22 of /proc/<pid>/stat (start time in clock ticks), 0 when the process is gone. */
static unsigned long long proc_starttime(pid_t pid)
{
    char path[64], text[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    const char *p = strrchr(text, ')');
    unsigned long long v = 0;
    /* After ")": state is field 3, starttime field 22. */
    for (int field = 2; p && *p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (p && sscanf(p, " %llu", &v) != 1)
        v = 0;
    return v;
}

/* A state directory that still holds a slot (its containers may be running). */
static bool state_dir_has_slots(const char *state_dir)
{
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/userns/sandboxes", state_dir) < 0)
        return true;
    _cleanup_closedir_ DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.')
            return true;
    return false;
}

typedef struct reg_entry {
    uint64_t start, count;
    long pid;
    unsigned long long starttime;
    char *state_dir;
} reg_entry;

static void reg_free(reg_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].state_dir);
    free(v);
}

static int reg_read(int fd, reg_entry **ret, size_t *ret_n)
{
    *ret = NULL;
    *ret_n = 0;
    int dfd = dup(fd);
    if (dfd < 0)
        return -errno;
    _cleanup_fclose_ FILE *f = fdopen(dfd, "r");
    if (!f) {
        close(dfd);
        return -errno;
    }
    rewind(f);
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    reg_entry *v = NULL;
    size_t n = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        unsigned long long s, c, st;
        long pid;
        int off = 0;
        if (sscanf(line, "%llu %llu %ld %llu %n", &s, &c, &pid, &st, &off) != 4 || off <= 0 ||
            line[off] != '/')
            continue; /* not ours: dropped */
        reg_entry *nv = realloc(v, (n + 1) * sizeof(*v));
        if (!nv) {
            reg_free(v, n);
            return -ENOMEM;
        }
        v = nv;
        v[n] = (reg_entry){
            .start = s, .count = c, .pid = pid, .starttime = st, .state_dir = strdup(line + off)};
        if (!v[n].state_dir) {
            reg_free(v, n);
            return -ENOMEM;
        }
        n++;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

static int reg_write(int fd, const reg_entry *v, size_t n)
{
    _cleanup_buf_ buf b = BUF_INIT;
    for (size_t i = 0; i < n; i++)
        if (buf_appendf(&b, "%" PRIu64 " %" PRIu64 " %ld %llu %s\n", v[i].start, v[i].count,
                        v[i].pid, v[i].starttime, v[i].state_dir) < 0)
            return -ENOMEM;
    const char *text = b.data;
    size_t len = b.len;
    if (ftruncate(fd, 0) < 0)
        return -errno;
    for (size_t off = 0; off < len;) {
        ssize_t w = pwrite(fd, text + off, len - off, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        off += (size_t)w;
    }
    return 0;
}

/* An entry of another state directory whose owner is gone and that holds no slot. */
static bool reg_stale(const reg_entry *e)
{
    struct stat st;
    bool alive = e->pid > 0 && (kill((pid_t)e->pid, 0) == 0 || errno == EPERM) &&
                 proc_starttime((pid_t)e->pid) == e->starttime;
    if (alive)
        return false;
    return stat(e->state_dir, &st) < 0 || !state_dir_has_slots(e->state_dir);
}

static int open_registry(const char *path, int *ret_fd)
{
    int r = mkdir_parents(path);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -errno;
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR)
            return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

static int read_range_record(const char *state_dir, uint32_t *ret_start, uint32_t *ret_count)
{
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/userns/range", state_dir) < 0)
        return -ENOMEM;
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    unsigned long long s, c;
    if (!f)
        return -errno;
    if (fscanf(f, "%llu %llu", &s, &c) != 2 || s > UINT32_MAX || c > UINT32_MAX)
        return -EINVAL;
    *ret_start = (uint32_t)s;
    *ret_count = (uint32_t)c;
    return 0;
}

static int write_atomic(const char *path, const char *content)
{
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp", path) < 0)
        return -ENOMEM;
    int r = fs_write_file(tmp, content, 0644);
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    return r;
}

static int load_slots(local_idmap *m)
{
    _cleanup_closedir_ DIR *d = opendir(m->slots_dir);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || strstr(de->d_name, ".tmp"))
            continue;
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/%s", m->slots_dir, de->d_name) < 0)
            return -ENOMEM;
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        unsigned long long s;
        if (!f || fscanf(f, "%llu", &s) != 1 || s > UINT32_MAX)
            continue;
        idmap_slot *v = realloc(m->slots, (m->n_slots + 1) * sizeof(*v));
        if (!v)
            return -ENOMEM;
        m->slots = v;
        if (!(m->slots[m->n_slots].uid = strdup(de->d_name)))
            return -ENOMEM;
        m->slots[m->n_slots++].start = (uint32_t)s;
    }
    return 0;
}

/* Picks or checks the range against the registry (locked) and records it there. */
/* Over ~100 lines on purpose: the read, the choice and the rewrite of the registry happen under
 * one lock held by fd, and each failure names the registry or the range for the user. */
static int take_range(local_idmap *m, const char *spec, char **ret_error)
{
    _cleanup_close_ int fd = -1;
    int r = open_registry(m->registry, &fd);
    if (r < 0)
        return failf(ret_error, r, "cannot open the user namespace registry %s: %s", m->registry,
                     strerror(-r));
    reg_entry *v = NULL;
    size_t n = 0;
    if ((r = reg_read(fd, &v, &n)) < 0)
        return failf(ret_error, r, "cannot read %s: %s", m->registry, strerror(-r));
    /* Keep the live entries of other state directories; ours is rewritten below. */
    size_t keep = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].state_dir, m->state_dir) == 0 || reg_stale(&v[i]))
            free(v[i].state_dir);
        else
            v[keep++] = v[i];
    }
    n = keep;
    uint32_t rec_start = 0, rec_count = 0;
    bool recorded = read_range_record(m->state_dir, &rec_start, &rec_count) == 0;
    bool explicit_ = spec && *spec;
    _cleanup_free_ char *what = NULL;
    r = 0;
    if (explicit_) {
        if (local_idmap_parse_range(spec, &m->start, &m->count) < 0)
            r = failf(ret_error, -EINVAL,
                      "--userns-range \"%s\": want START:COUNT with COUNT a multiple of %u, START "
                      "> 0 and START + COUNT < 2^32 - 1",
                      spec, LOCAL_IDMAP_SLOT);
        else if (host_account_overlap(m->start, m->count, &what) > 0)
            r = failf(ret_error, -EEXIST,
                      "--userns-range %" PRIu32 ":%" PRIu32 " overlaps a host account: %s",
                      m->start, m->count, what ? what : "?");
    } else {
        /* The recorded range first (running containers keep their ids), else the first free
         * block of the default pool. */
        uint64_t cand[1 + (UINT64_C(1) << 32) / LOCAL_IDMAP_AUTO_COUNT];
        size_t nc = 0;
        if (recorded)
            cand[nc++] = ((uint64_t)rec_start << 32) | rec_count;
        for (uint64_t s = LOCAL_IDMAP_AUTO_START; s + LOCAL_IDMAP_AUTO_COUNT < UINT32_MAX;
             s += LOCAL_IDMAP_AUTO_COUNT)
            cand[nc++] = (s << 32) | LOCAL_IDMAP_AUTO_COUNT;
        r = -ENOSPC;
        for (size_t c = 0; c < nc && r < 0; c++) {
            uint64_t s = cand[c] >> 32, cnt = cand[c] & UINT32_MAX;
            bool busy = false;
            for (size_t i = 0; i < n && !busy; i++)
                busy = overlaps(s, cnt, v[i].start, v[i].count);
            free(what);
            what = NULL;
            if (busy || host_account_overlap(s, cnt, &what) > 0)
                continue;
            m->start = (uint32_t)s;
            m->count = (uint32_t)cnt;
            r = 0;
        }
        if (r < 0)
            r = failf(ret_error, r,
                      "no free user namespace range: every block of %u ids from %u is taken by "
                      "another asb serve or a host account; pass --userns-range START:COUNT",
                      LOCAL_IDMAP_AUTO_COUNT, LOCAL_IDMAP_AUTO_START);
    }
    for (size_t i = 0; r == 0 && i < n; i++)
        if (overlaps(m->start, m->count, v[i].start, v[i].count))
            r = failf(ret_error, -EEXIST,
                      "user namespace range %" PRIu32 ":%" PRIu32 " overlaps the range %" PRIu64
                      ":%" PRIu64 " of the asb serve (pid %ld) of state directory %s",
                      m->start, m->count, v[i].start, v[i].count, v[i].pid, v[i].state_dir);
    for (size_t i = 0; r == 0 && i < m->n_slots; i++)
        if (m->slots[i].start < m->start ||
            (uint64_t)m->slots[i].start + LOCAL_IDMAP_SLOT > (uint64_t)m->start + m->count)
            r = failf(ret_error, -EEXIST,
                      "sandbox %s of state directory %s has host ids %" PRIu32 "-%" PRIu32
                      ", outside the user namespace range %" PRIu32 ":%" PRIu32
                      " (the recorded range is %" PRIu32 ":%" PRIu32 "; delete its sandboxes "
                      "or keep that range)",
                      m->slots[i].uid, m->state_dir, m->slots[i].start,
                      m->slots[i].start + (LOCAL_IDMAP_SLOT - 1), m->start, m->count, rec_start,
                      rec_count);
    if (r == 0) {
        reg_entry *nv = realloc(v, (n + 1) * sizeof(*v));
        char *sd = strdup(m->state_dir);
        if (!nv || !sd) {
            free(sd);
            if (nv)
                v = nv;
            r = -ENOMEM;
        } else {
            v = nv;
            v[n++] = (reg_entry){.start = m->start,
                                 .count = m->count,
                                 .pid = getpid(),
                                 .starttime = proc_starttime(getpid()),
                                 .state_dir = sd};
            r = reg_write(fd, v, n);
            if (r < 0)
                failf(ret_error, r, "cannot write %s: %s", m->registry, strerror(-r));
        }
    }
    reg_free(v, n);
    if (r < 0)
        return r;
    _cleanup_free_ char *path = NULL, *line = NULL;
    if (asprintf(&path, "%s/userns/range", m->state_dir) < 0 ||
        asprintf(&line, "%" PRIu32 " %" PRIu32 "\n", m->start, m->count) < 0)
        return -ENOMEM;
    r = write_atomic(path, line);
    if (r < 0)
        return failf(ret_error, r, "cannot write %s: %s", path, strerror(-r));
    return 0;
}

int local_idmap_open(const local_idmap_options *o, local_idmap **ret, char **ret_error)
{
    *ret = NULL;
    *ret_error = NULL;
    if (o->range && strcmp(o->range, "off") == 0)
        return 0;
    local_idmap *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    char canon[PATH_MAX];
    int r = 0;
    if (!realpath(o->state_dir, canon))
        r = failf(ret_error, -errno, "state dir %s: %s", o->state_dir, strerror(errno));
    else if (!(m->state_dir = strdup(canon)) ||
             !(m->registry = strdup(o->registry ? o->registry : LOCAL_IDMAP_REGISTRY)) ||
             asprintf(&m->slots_dir, "%s/userns/sandboxes", canon) < 0)
        r = -ENOMEM;
    if (r == 0 && (r = mkdir_p(m->slots_dir, 0700)) < 0)
        failf(ret_error, r, "cannot create %s: %s", m->slots_dir, strerror(-r));
    if (r == 0 && (r = load_slots(m)) < 0)
        failf(ret_error, r, "cannot read %s: %s", m->slots_dir, strerror(-r));
    if (r == 0) {
        /* The staging mount point, searchable by every sandbox's root (and its parent). */
        r = mkdir_p(LOCAL_IDMAP_ROOTFS, 0755);
        if (r == 0 && (chmod("/run/asb", 0755) < 0 || chmod(LOCAL_IDMAP_ROOTFS, 0755) < 0))
            r = -errno;
        if (r < 0)
            failf(ret_error, r, "cannot create %s: %s", LOCAL_IDMAP_ROOTFS, strerror(-r));
    }
    if (r == 0)
        r = take_range(m, o->range, ret_error);
    if (r < 0) {
        free(m->registry); /* nothing registered: do not touch the registry on free */
        m->registry = NULL;
        local_idmap_free(m);
        return r;
    }
    *ret = m;
    return 0;
}

local_idmap *local_idmap_free(local_idmap *m)
{
    if (!m)
        return NULL;
    _cleanup_close_ int fd = -1;
    if (m->registry && m->n_slots == 0 && open_registry(m->registry, &fd) == 0) {
        reg_entry *v = NULL;
        size_t n = 0, keep = 0;
        if (reg_read(fd, &v, &n) == 0) {
            for (size_t i = 0; i < n; i++) {
                if (strcmp(v[i].state_dir, m->state_dir) == 0 && v[i].pid == (long)getpid())
                    free(v[i].state_dir);
                else
                    v[keep++] = v[i];
            }
            if (keep != n)
                reg_write(fd, v, keep);
            reg_free(v, keep);
        }
    }
    for (size_t i = 0; i < m->n_slots; i++)
        free(m->slots[i].uid);
    free(m->slots);
    free(m->slots_dir);
    free(m->state_dir);
    free(m->registry);
    pthread_mutex_destroy(&m->lock);
    free(m);
    return NULL;
}

void local_idmap_range(const local_idmap *m, uint32_t *ret_start, uint32_t *ret_count)
{
    *ret_start = m->start;
    *ret_count = m->count;
}

static int slot_lookup(const local_idmap *m, const char *uid, uint32_t *ret_start)
{
    for (size_t i = 0; i < m->n_slots; i++)
        if (strcmp(m->slots[i].uid, uid) == 0) {
            *ret_start = m->slots[i].start;
            return 0;
        }
    return -ENOENT;
}

int local_idmap_lookup(const local_idmap *m, const char *uid, uint32_t *ret_start)
{
    pthread_mutex_t *lock = (pthread_mutex_t *)&m->lock;
    pthread_mutex_lock(lock);
    int r = slot_lookup(m, uid, ret_start);
    pthread_mutex_unlock(lock);
    return r;
}

static bool slot_taken(const local_idmap *m, uint32_t start)
{
    for (size_t i = 0; i < m->n_slots; i++)
        if (m->slots[i].start == start)
            return true;
    return false;
}

static int slot_get(local_idmap *m, const char *uid, uint32_t *ret_start)
{
    if (slot_lookup(m, uid, ret_start) == 0)
        return 0;
    if (!*uid || strchr(uid, '/') || uid[0] == '.')
        return -EINVAL;
    uint32_t n = m->count / LOCAL_IDMAP_SLOT, s = 0;
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++) {
        s = m->start + i * LOCAL_IDMAP_SLOT;
        found = !slot_taken(m, s);
    }
    if (!found)
        return -ENOSPC;
    idmap_slot *v = realloc(m->slots, (m->n_slots + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    m->slots = v;
    _cleanup_free_ char *path = NULL, *line = NULL, *u = strdup(uid);
    if (!u || asprintf(&path, "%s/%s", m->slots_dir, uid) < 0 ||
        asprintf(&line, "%" PRIu32 "\n", s) < 0)
        return -ENOMEM;
    int r = write_atomic(path, line);
    if (r < 0)
        return r;
    m->slots[m->n_slots++] = (idmap_slot){.uid = TAKE_PTR(u), .start = s};
    *ret_start = s;
    return 0;
}

int local_idmap_get(local_idmap *m, const char *uid, uint32_t *ret_start)
{
    pthread_mutex_lock(&m->lock);
    int r = slot_get(m, uid, ret_start);
    pthread_mutex_unlock(&m->lock);
    return r;
}

static void slot_release(local_idmap *m, const char *uid)
{
    for (size_t i = 0; i < m->n_slots; i++) {
        if (strcmp(m->slots[i].uid, uid) != 0)
            continue;
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "%s/%s", m->slots_dir, uid) >= 0)
            unlink(path);
        free(m->slots[i].uid);
        m->slots[i] = m->slots[--m->n_slots];
        return;
    }
}

void local_idmap_release(local_idmap *m, const char *uid)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    slot_release(m, uid);
    pthread_mutex_unlock(&m->lock);
}

void local_idmap_gc(local_idmap *m, bool (*keep)(const char *uid, void *payload), void *payload)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->n_slots;) {
        if (keep(m->slots[i].uid, payload)) {
            i++;
            continue;
        }
        _cleanup_free_ char *uid = strdup(m->slots[i].uid);
        if (!uid)
            break;
        slot_release(m, uid);
    }
    pthread_mutex_unlock(&m->lock);
}

int local_idmap_stage_enter(const char *rootfs, local_idmap_stage *st)
{
    *st = (local_idmap_stage){-1, -1};
    st->mnt_fd = open("/proc/thread-self/ns/mnt", O_RDONLY | O_CLOEXEC);
    st->cwd_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (st->mnt_fd < 0 || st->cwd_fd < 0) {
        int r = -errno;
        local_idmap_stage_leave(st);
        return r;
    }
    if (unshare(CLONE_NEWNS) < 0) { /* implies CLONE_FS: this thread only */
        int r = -errno;
        local_idmap_stage_leave(st);
        return r;
    }
    int r = 0;
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
        mount(rootfs, LOCAL_IDMAP_ROOTFS, NULL, MS_BIND | MS_REC, NULL) < 0)
        r = -errno;
    if (r < 0) {
        int k = local_idmap_stage_leave(st);
        return k < 0 ? k : r;
    }
    return 0;
}

int local_idmap_stage_leave(local_idmap_stage *st)
{
    int r = 0;
    if (st->mnt_fd >= 0 && setns(st->mnt_fd, CLONE_NEWNS) < 0)
        r = -errno;
    if (r == 0 && st->cwd_fd >= 0 && fchdir(st->cwd_fd) < 0)
        r = -errno;
    if (st->mnt_fd >= 0)
        close(st->mnt_fd);
    if (st->cwd_fd >= 0)
        close(st->cwd_fd);
    *st = (local_idmap_stage){-1, -1};
    return r;
}
