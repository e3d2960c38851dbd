/* Status strings, dtype sizes and the version: the parts of the public API
 * that need no communicator. */
#include <tnt/tnt.h>

#include "util/dtype.h"
#include "util/log.h"

#ifndef TNT_VERSION_STRING
#define TNT_VERSION_STRING "0.0.0"
#endif

TNT_API const char *tnt_status_string(tnt_status_t status)
{
    switch (status) {
    case TNT_IN_PROGRESS:
        return "operation in progress";
    case TNT_OK:
        return "success";
    case TNT_ERR_INVALID_ARG:
        return "invalid argument";
    case TNT_ERR_NO_MEMORY:
        return "out of memory";
    case TNT_ERR_TIMEOUT:
        return "timed out waiting for a peer; see TNT_TIMEOUT";
    case TNT_ERR_PEER_FAILED:
        return "a peer process failed";
    case TNT_ERR_BOOTSTRAP:
        return "PMIx bootstrap failed";
    case TNT_ERR_TRANSPORT:
        return "transport error";
    case TNT_ERR_UNSUPPORTED:
        return "not supported by this build or system";
    case TNT_ERR_MISMATCH:
        return "ranks disagree";
    case TNT_ERR_NOT_INITIALIZED:
        return "libtnt not initialized (call tnt_init first)";
    case TNT_ERR_SYSTEM:
        return "system call failed";
    }
    return "unknown status";
}

TNT_API const char *tnt_last_error(void)
{
    return tnt_error_message();
}

TNT_API int tnt_last_error_printed(void)
{
    return tnt_error_printed();
}

TNT_API size_t tnt_dtype_size(tnt_dtype_t dtype)
{
    return tnt_dtype_bytes(dtype);
}

TNT_API const char *tnt_version(void)
{
    return TNT_VERSION_STRING;
}
