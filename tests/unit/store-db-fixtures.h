/* A throwaway SQLite state database for the local-store unit tests (header-only, static). */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "<fresh temp dir>/state.db" (the file itself not created yet), the dir named after `test`;
 * owned by the caller, to hand to remove_db(). NULL on failure. */
static inline char *temp_db(const char *test)
{
    char *dir = NULL, *path = NULL;
    if (asprintf(&dir, "/tmp/%s-XXXXXX", test) < 0)
        return NULL;
    if (!mkdtemp(dir) || asprintf(&path, "%s/state.db", dir) < 0)
        path = NULL;
    free(dir);
    return path;
}

/* Removes the database with its -wal and -shm files and its temp dir; frees path. */
static inline void remove_db(char *path)
{
    char buf[512];
    const char *suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(buf, sizeof(buf), "%s%s", path, suffix[i]);
        unlink(buf);
    }
    *strrchr(path, '/') = '\0';
    rmdir(path);
    free(path);
}
