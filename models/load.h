/* load.h: reading model and ONNX files (internal to models/): file.c. */
#ifndef SB_MODELS_LOAD_H
#define SB_MODELS_LOAD_H

#include "shardbench/model.h"

#define MAX_MODEL_BYTES ((size_t)64 << 20)

/* sb_read_file for a regular file only: a directory, pipe or device is one
 * clear error (nothing is opened, so a pipe cannot block). At most
 * max_bytes are read. */
int sb_models_read_file(const char *path, const char *what, size_t max_bytes, char **data,
                        size_t *size, sb_error *err);

#endif
