/* lstm.h: the distributed multi-layer LSTM op (internal to runtime/). */
#ifndef SB_RUNTIME_LSTM_H
#define SB_RUNTIME_LSTM_H

#include "../executor/exec.h"

int lstm_setup(sb_executor *ex, opx *o, sb_error *err);
int lstm_forward(sb_executor *ex, opx *o, sb_error *err);
int lstm_backward(sb_executor *ex, opx *o, sb_error *err);
void lstm_release_step(sb_executor *ex, opx *o);
void lstm_free(sb_executor *ex, opx *o);

#endif
