#!/bin/sh
# Test helper: per_rank_env.sh RANK VAR=VALUE -- COMMAND...
# Runs COMMAND with VAR=VALUE added to the environment on rank RANK
# (PMIX_RANK) only, so that one rank of a job can differ, e.g. load a
# different libnccl.so.2 through LD_LIBRARY_PATH.
rank=$1
assignment=$2
shift 2
[ "$1" = "--" ] && shift
if [ "${PMIX_RANK:-0}" = "$rank" ]; then
    export "${assignment?}"
fi
exec "$@"
