/*
 * The pure parts of the torchrun variables the plugin gives each task
 * (docs/torch-distributed.md): the step's first node, read from a Slurm
 * node list, and the MASTER_PORT a step gets from the site's port range.
 * No Slurm calls, so tests/unit/test_spank_torch_env.c covers them.
 */
#ifndef TNT_SPANK_TORCH_ENV_H
#define TNT_SPANK_TORCH_ENV_H

#include <stddef.h>
#include <stdint.h>

/* The built-in MASTER_PORT range (plugstack.conf: master_port_range=LOW-HIGH).
 * It starts at torchrun's default port and stays below Linux's ephemeral
 * ports (32768-60999), which the kernel hands out to outgoing connections. */
#define TNT_SPANK_MASTER_PORT_LOW  29500
#define TNT_SPANK_MASTER_PORT_HIGH 30499

/*
 * The first host of a Slurm host list as SLURM_STEP_NODELIST writes it
 * ("n[1-4]", "gpu[07,09-12],cpu3", "rack[1-2]-n[3-4]"): the first name of
 * the list, each bracket replaced by the first number in it, written as
 * the list writes it (leading zeros kept). 0 with the name in out, or -1
 * with errbuf saying what is wrong with the list.
 */
int tnt_spank_first_node(const char *nodelist, char *out, size_t len, char *errbuf, size_t errlen);

/*
 * MASTER_PORT of a step: low + (job_id * 31 + step_id) mod (high - low + 1).
 * The same on every node of the step without any communication; two steps
 * running at once on one node collide only when their keys agree modulo
 * the span (docs/torch-distributed.md). Needs 0 < low <= high <= 65535.
 */
int tnt_spank_master_port(uint32_t job_id, uint32_t step_id, int low, int high);

#endif
