#!/bin/bash
# Fails if any given ELF file has a DT_NEEDED entry on a CUDA or NCCL
# library: libtnt.so and the Python extension must load on machines without
# CUDA (the CUDA code is in libtnt_cuda.so, which libtnt dlopen()s).
status=0
for f in "$@"; do
    needed=$(readelf -d "$f" | grep NEEDED) || { echo "FAIL: readelf -d $f"; exit 1; }
    echo "$f:"
    echo "$needed"
    if echo "$needed" | grep -Eiq 'cuda|nccl'; then
        echo "FAIL: $f needs a CUDA library"
        status=1
    fi
done
[ $status = 0 ] && echo OK
exit $status
