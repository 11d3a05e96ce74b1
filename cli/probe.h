/* probe.h: the fixed work `run` times beside each step (probe.c). */
#ifndef SB_CLI_PROBE_H
#define SB_CLI_PROBE_H

/* Seconds this rank took for the probe's fixed work. */
double cli_probe_seconds(void);

#endif
