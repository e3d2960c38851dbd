/*
 * UCX transport: transport selection and UCX configuration, pure helpers
 * (unit-tested by test_ucx_tls): which transports a UCX_TLS value names,
 * what an endpoint uses, the TCP segment size, status mapping.
 */
#include "transport/ucx/ucx_impl.h"

#include "util/log.h"
#include "util/wait.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

tnt_status_t tnt_ucx_status_of(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:
        return TNT_OK;
    case UCS_ERR_NO_MEMORY:
        return TNT_ERR_NO_MEMORY;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return TNT_ERR_MISMATCH;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CANCELED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
        return TNT_ERR_PEER_FAILED;
    case UCS_ERR_TIMED_OUT:
        return TNT_ERR_TIMEOUT;
    default:
        return TNT_ERR_TRANSPORT;
    }
}

/* Reads the transports UCX chose for an endpoint out of ucp_ep_print_info
 * (1.13 has no query for them): lines like
 *   "#                 lane[0]:  3:tcp/eth0.0 md[1]  ..." -> "tcp/eth0". */
int tnt_ucx_transports_tcp_only(const char *transports)
{
    const char *p = transports;

    if (p == NULL || *p == '\0') {
        return 0;
    }
    for (;;) {
        if (strncmp(p, "tcp/", 4) != 0) {
            return 0;
        }
        p = strchr(p, ',');
        if (p == NULL) {
            return 1;
        }
        p++;
    }
}

void tnt_ucx_describe_ep(struct tnt_ucx_peer *peer)
{
    char *text = NULL;
    size_t len = 0;
    FILE *stream = open_memstream(&text, &len);
    size_t used = 0;

    peer->transport[0] = '\0';
    if (stream == NULL) {
        return;
    }
    ucp_ep_print_info(peer->ep, stream);
    fclose(stream);
    peer->rndv_from = 0;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *lane = strstr(line, "lane[");
        char *colon;
        char name[64];
        size_t n;

        /* "tag_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)" */
        if (strstr(line, "tag_send:") != NULL && strstr(line, "..<rndv>") != NULL) {
            char *end = strstr(line, "..<rndv>");
            char *start = end;
            while (start > line && start[-1] >= '0' && start[-1] <= '9') {
                start--;
            }
            if (start < end) {
                peer->rndv_from = (size_t)strtoull(start, NULL, 10);
            }
            continue;
        }
        if (lane == NULL || (colon = strchr(lane + 5, ':')) == NULL) {
            continue;
        }
        /* after "lane[i]:" comes " <rsc>:<tl>/<dev> ..." */
        colon = strchr(colon + 1, ':');
        if (colon == NULL) {
            continue;
        }
        n = strcspn(colon + 1, " .\t");
        if (n == 0 || n >= sizeof(name)) {
            continue;
        }
        memcpy(name, colon + 1, n);
        name[n] = '\0';
        if (strstr(peer->transport, name) != NULL) {
            continue;
        }
        if (used + n + 2 < sizeof(peer->transport)) {
            used += (size_t)snprintf(peer->transport + used, sizeof(peer->transport) - used, "%s%s",
                                     used ? "," : "", name);
        }
    }
    free(text);
    peer->tcp_only = tnt_ucx_transports_tcp_only(peer->transport);
}

/* UCX's TCP transport moves a message of up to one segment as one eager
 * message and anything longer as a rendezvous of segment-sized active
 * messages, each copied once more out of UCX's receive buffer (with
 * peer-failure handling UCX 1.13 has no zero-copy rendezvous over TCP).
 * Its segments (64 KiB received, 8 KiB sent) are small for the 32 KiB-1 MiB
 * chunks of the multi-node algorithms: each chunk then costs a rendezvous
 * and many small socket calls. Sets both sizes to `bytes`, except where the
 * user set UCX's own variable, and not at all when UCX_TLS leaves TCP out
 * (UCX would warn about settings no transport uses). The names are the TCP
 * transport's own (UCX applies a key to every transport that has it; in
 * UCX 1.13 only TCP has these two). docs/multinode.md, "TCP segments". */
void tnt_ucx_config_tcp_segments(ucp_config_t *config, size_t bytes)
{
    static const char *const names[] = { "RX_SEG_SIZE", "TX_SEG_SIZE" };
    char value[32];

    if (bytes == 0 || !tnt_ucx_tls_includes_tcp(getenv("UCX_TLS"))) {
        return;
    }
    snprintf(value, sizeof(value), "%zu", bytes);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char env_name[32];
        ucs_status_t us;

        snprintf(env_name, sizeof(env_name), "UCX_TCP_%s", names[i]);
        if (getenv(env_name) != NULL) {
            continue;
        }
        us = ucp_config_modify(config, names[i], value);
        if (us != UCS_OK) {
            /* Only slower, not wrong: UCX keeps its own size. */
            tnt_log_warn("ucx: setting %s=%s failed (%s); UCX keeps its own TCP segments. "
                         "Set TNT_UCX_TCP_SEG_KB=0 to silence this",
                         env_name, value, ucs_status_string(us));
        }
    }
}

/* UCX's posix transport maps a receive pool of about 4 MiB in /dev/shm for
 * every worker as soon as the worker exists (512 buffers of 8 KiB at a
 * time). Every communicator has a point-to-point worker, used or not, so in
 * a container's small /dev/shm (Docker's 64 MiB) that pool would take the
 * room the collectives' segment needs and fail tnt_init where it fit
 * before. UCX's sysv transport is the same shared-memory protocol with its
 * pool in SysV shared memory, outside /dev/shm, so the point-to-point
 * context leaves posix out. UCX 1.13 ignores a smaller pool step set
 * through ucp_config_modify (RX_BUFS_GROW), hence the transport list. A
 * UCX_TLS of the user's stands. */
void tnt_ucx_config_avoid_dev_shm(ucp_config_t *config)
{
    const char *tls = getenv("UCX_TLS");
    ucs_status_t us;

    if (tls != NULL && *tls != '\0') {
        return;
    }
    us = ucp_config_modify(config, "TLS", "^posix");
    if (us != UCS_OK) {
        /* Only more /dev/shm used, not wrong. */
        tnt_log_warn("ucx: leaving UCX's posix transport out failed (%s); point-to-point "
                     "messages map their receive pool in /dev/shm",
                     ucs_status_string(us));
    }
}

int tnt_ucx_tls_includes_tcp(const char *tls)
{
    int exclude = 0, named_tcp = 0, named_all = 0;

    if (tls == NULL || *tls == '\0') {
        return 1; /* UCX's default: all */
    }
    if (*tls == '^') {
        exclude = 1;
        tls++;
    }
    while (*tls != '\0') {
        size_t n = strcspn(tls, ","), name_len = strcspn(tls, ",:");

        if (name_len == 3 && strncasecmp(tls, "tcp", 3) == 0) {
            named_tcp = 1;
        } else if (name_len == 3 && strncasecmp(tls, "all", 3) == 0) {
            named_all = 1;
        }
        tls += n;
        if (*tls == ',') {
            tls++;
        }
    }
    return exclude ? !named_tcp : named_tcp || named_all;
}
