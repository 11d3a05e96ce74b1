/* file.c: reading a model or ONNX file (sb_models_read_file, load.h): a
 * regular file only, bounded. Below both readers: load.c (model text) and
 * onnx/load.c (ONNX bytes). */
#define _GNU_SOURCE
#include "load.h"

#include <sys/stat.h>

int sb_models_read_file(const char *path, const char *what, size_t max_bytes, char **data,
                        size_t *size, sb_error *err)
{
    struct stat st;
    *data = NULL;
    *size = 0;
    int known = stat(path, &st) == 0; /* else sb_read_file says why it cannot open it */
    if (known && S_ISDIR(st.st_mode))
        return sb_fail(err, SB_EXIT_INPUT, "%s: is a directory, not a %s", path, what);
    if (known && !S_ISREG(st.st_mode))
        return sb_fail(err, SB_EXIT_INPUT,
                       "%s: not a regular file (a pipe, device or socket), not read as a %s", path,
                       what);
    return sb_read_file(path, what, max_bytes, data, size, err);
}
