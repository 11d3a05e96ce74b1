/* main.c: the `shardbench` command. Dispatches to subcommands; prints the
 * version and what was compiled in. All the work is in libshardbench. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "build_info.h"
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: shardbench COMMAND [options]\n"
            "\n"
            "Choose how to parallelize DNN training (PaSE's exact search).\n"
            "\n"
            "commands:\n"
            "  search   find the best strategy for a model and device count\n"
            "  paper    search the paper's models over a range of device counts and\n"
            "           print the strategy tables (the default main job)\n"
            "  run      train a model under a strategy on P MPI ranks (mpirun -np P)\n"
            "\n"
            "  shardbench COMMAND --help   options of a command\n"
            "  shardbench --version        version, commit, compiled-in backends\n");
}

static void version(void)
{
    printf("shardbench %s (commit %s, %s build, %s)\n", SB_VERSION, SB_GIT_COMMIT, SB_BUILD_TYPE,
           SB_C_COMPILER);
    printf("libraries: SQLite %s\n", sqlite3_libversion());
    printf("backends: none yet (the runtime is not part of this build)\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        version();
        return 0;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "search"))
        return cmd_search(argc - 1, argv + 1);
    if (!strcmp(cmd, "paper"))
        return cmd_paper(argc - 1, argv + 1);
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 1, argv + 1);
    fprintf(stderr, "shardbench: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
