/* cli.h: subcommands of the `shardbench` command (a thin front end over
 * libshardbench). Each returns the process exit status. */
#ifndef SB_CLI_H
#define SB_CLI_H

#include "shardbench/measure.h"
#include "shardbench/search.h"
#include "shardbench/strategy.h"

int cmd_search(int argc, char **argv);
int cmd_paper(int argc, char **argv);
int cmd_paper_table2(int argc, char **argv); /* paper --table2 (cmd_paper_table2.c) */
int cmd_run(int argc, char **argv);
int cmd_candidates(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_regress(int argc, char **argv);
int cmd_nightly(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_validate(int argc, char **argv); /* cmd_validate.c */
/* search --algo megatron (search_megatron.c): 1 when argv asks for it */
int search_is_megatron(int argc, char **argv);
int cmd_search_megatron(int argc, char **argv);

/* `bench`'s options into a (cmd_bench.c; also read by `nightly`): 0, 1 for
 * --help, -1 with err set. */
int parse_bench_args(int argc, char **argv, sb_bench_opts *a, sb_error *err);
/* Prints err to stderr as "shardbench: msg" and returns its exit code. */
int cli_fail(const sb_error *err);

/* Shared printing: a strategy as a table (grouped like the paper's Table II),
 * as TSV, or as JSON. */
void print_strategy_table(FILE *f, const sb_problem *pb, const sb_result *r, const char *algo);
void print_strategy_tsv(FILE *f, const sb_problem *pb, const sb_result *r);

/* A JSON number (jansson): an integer when v is integral (as %g writes
 * it), else a real; null when v is NaN or infinite (JSON has no such
 * numbers). */
struct json_t *cli_jreal(double v);

/* Parses a p list "4,8,16" or a range "4..64" (powers of two). */
int parse_p_list(const char *s, int *out, int max, sb_error *err);

#endif
