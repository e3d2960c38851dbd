/*
 * --hostfile: multi-node runs outside SLURM belong to OpenMPI's mpirun, which
 * has its own PMIx server; the launcher translates its options and execs it.
 */
#ifndef TNT_LAUNCHER_HANDOFF_H
#define TNT_LAUNCHER_HANDOFF_H

#include "options.h"

/* Execs mpirun (or prints its command line with --dry-run). Returns only
 * when it did not exec: 0 after a dry run, else the launcher's exit status. */
int tnt_launch_handoff_mpirun(const struct tnt_launch_options *opts);

#endif
