/*
 * TEST DOUBLE of an NCCL that libtnt cannot use (libnccl.so.2 without
 * ncclCommInitRankConfig, as NCCL before 2.14): the plugin loads it, finds
 * the functions it needs missing, and reports NCCL unusable on this rank,
 * the same outcome as a libnccl.so.2 that does not load.
 */
#include <nccl.h>

ncclResult_t ncclGetVersion(int *version)
{
    *version = 21300;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    return r == ncclSuccess ? "no error" : "error (unusable nccl double)";
}
