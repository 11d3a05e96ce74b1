/* load.h: reading model and ONNX files (internal to models/): both read
 * through sb_read_file (common.h), which refuses anything but a regular
 * file without blocking on it and bounds the size. */
#ifndef SB_MODELS_LOAD_H
#define SB_MODELS_LOAD_H

#include "shardbench/model.h"

#define MAX_MODEL_BYTES ((size_t)64 << 20)

#endif
