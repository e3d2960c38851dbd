/*
 * Forwarding the ranks' stderr to the launcher's, one whole line per write
 * so that ranks' lines never interleave mid-line, and remembering each
 * rank's last line for the failure report.
 */
#ifndef TNT_LAUNCHER_FORWARD_H
#define TNT_LAUNCHER_FORWARD_H

#include "launch.h"

/* Forwards what rs's stderr pipe holds now (it is non-blocking); at EOF
 * flushes the last partial line and closes the pipe (rs->err_fd = -1). */
void tnt_launch_forward_stderr(struct rank_state *rs);

#endif
