/* registry.c: the backends by name (`run --backend NAME`). Its own file so
 * that a new backend adds one line here and its table elsewhere, and no
 * backend's file knows the others. */
#include <stdio.h>
#include <string.h>

#include "shardbench/backend.h"

static const sb_backend *get_cpu(sb_error *err)
{
    (void)err;
    return &sb_backend_cpu;
}

static const sb_backend *get_cpu_devmem(sb_error *err)
{
    (void)err;
    return sb_backend_cpu_devmem();
}

static const struct {
    const char *name;
    const sb_backend *(*get)(sb_error *err); /* NULL with err set when unavailable */
    int tests_only;                          /* not offered to users in messages */
} backends[] = {
    {"cpu", get_cpu, 0},
    {"cuda", sb_backend_cuda_get, 0},
    {"cpu-devmem", get_cpu_devmem, 1},
};

const sb_backend *sb_backend_get(const char *name, sb_error *err)
{
    size_t n = sizeof backends / sizeof *backends;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, backends[i].name))
            return backends[i].get(err);
    char list[128] = "";
    for (size_t i = 0; i < n; i++)
        if (!backends[i].tests_only)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "",
                     backends[i].name);
    sb_fail(err, SB_EXIT_INPUT, "unknown backend '%s' (%s; cpu-devmem for tests)", name, list);
    return NULL;
}

void sb_backend_finalize(const sb_backend *be)
{
    if (be && be->finalize)
        be->finalize();
}
