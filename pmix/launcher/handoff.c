#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handoff.h"
#include "launch.h"
#include "msg.h"
#include "plan.h"
#include "which.h"

int tnt_launch_handoff_mpirun(const struct tnt_launch_options *opts)
{
    char path[4096];
    char **argv;

    if (getenv("SLURM_JOB_ID") != NULL) {
        tnt_launch_error("--hostfile is for machines without SLURM; inside a SLURM allocation "
                         "start the ranks with: srun --tarantella [-N NODES] "
                         "[--ntasks-per-node=R] PROGRAM");
        return EXIT_USAGE;
    }
    if (tnt_launch_find_executable("mpirun", path, sizeof path) != 0) {
        tnt_launch_error("--hostfile hands multi-node jobs to OpenMPI's mpirun, which is not "
                         "installed here (Debian: apt install openmpi-bin). Multi-node runs "
                         "belong to SLURM: srun --tarantella -N NODES PROGRAM");
        return EXIT_LAUNCH_ERROR;
    }
    argv = tnt_launch_mpirun_argv(opts, path);
    if (argv == NULL) {
        tnt_launch_error("out of memory");
        return EXIT_LAUNCH_ERROR;
    }
    if (opts->dry_run || tnt_launch_verbosity >= TNT_LAUNCH_INFO) {
        FILE *out = opts->dry_run ? stdout : stderr;

        fprintf(out, "tarantella: %s:", opts->dry_run ? "dry run, would execute" : "executing");
        for (int i = 0; argv[i] != NULL; i++) {
            fprintf(out, " %s", argv[i]);
        }
        fprintf(out, "\n");
        if (opts->dry_run) {
            tnt_launch_argv_free(argv);
            return 0;
        }
    }
    if (opts->pin_memory) {
        tnt_launch_warn("--pin-memory has no mpirun equivalent and is ignored with --hostfile");
    }
    fflush(NULL);
    execv(path, argv);
    tnt_launch_error("cannot execute %s: %s", path, strerror(errno));
    tnt_launch_argv_free(argv);
    return EXIT_NOT_FOUND;
}
