/*
 * Which UCX transports are TCP only (reduce on arrival's auto mode,
 * tnt_ucx_transports_tcp_only); and which UCX_TLS values let UCX use its
 * TCP transport
 * (transport/ucx/ucx_config.c, tnt_ucx_tls_includes_tcp). libtnt sets UCX's TCP
 * segment size only then: a setting no transport uses makes UCX warn on
 * every rank ("invalid configurations"), e.g. on an InfiniBand cluster run
 * with UCX_TLS=rc,sm,self.
 */
#include "transport/ucx/ucx.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static void test_tcp_included(void **state)
{
    static const char *const with_tcp[] = {
        NULL,       "",           "all",    "tcp", "tcp,self",    "rc,sm,tcp,self", "TCP",
        "ALL,self", "rc,tcp:aux", "^rc,sm", "^ib", "^rc_mlx5,ud", "sm,all",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(with_tcp) / sizeof(with_tcp[0]); i++) {
        if (!tnt_ucx_tls_includes_tcp(with_tcp[i])) {
            fail_msg("UCX_TLS=%s includes TCP", with_tcp[i] ? with_tcp[i] : "(unset)");
        }
    }
}

static void test_tcp_left_out(void **state)
{
    static const char *const without_tcp[] = {
        "rc,sm,self", "dc,sm,self", "ud,self", "^tcp",   "^tcp,sm",    "^rc,tcp:aux",
        "sm",         "self",       "tcpx",    "rc_tcp", "posix,self",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(without_tcp) / sizeof(without_tcp[0]); i++) {
        if (tnt_ucx_tls_includes_tcp(without_tcp[i])) {
            fail_msg("UCX_TLS=%s leaves TCP out", without_tcp[i]);
        }
    }
}

/* Reduce on arrival's auto mode: only peers whose every UCX lane is TCP
 * (there UCX's rendezvous copies out of its buffers anyway); RDMA and
 * shared memory keep their zero-copy rendezvous into the staging slot. */
static void test_tcp_only_transports(void **state)
{
    static const char *const tcp_only[] = { "tcp/lo", "tcp/eth0", "tcp/eth0,tcp/ib0" };
    static const char *const not_only[] = {
        "",
        "rc_mlx5/mlx5_0:1",
        "rc_mlx5/mlx5_0:1,ud_mlx5/mlx5_0:1",
        "tcp/eth0,rc_mlx5/mlx5_0:1",
        "posix/memory,cma/memory",
        "dc_mlx5/mlx5_0:1,tcp/eth0",
        "tcpx/eth0",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(tcp_only) / sizeof(tcp_only[0]); i++) {
        if (!tnt_ucx_transports_tcp_only(tcp_only[i])) {
            fail_msg("'%s' is TCP only", tcp_only[i]);
        }
    }
    for (size_t i = 0; i < sizeof(not_only) / sizeof(not_only[0]); i++) {
        if (tnt_ucx_transports_tcp_only(not_only[i])) {
            fail_msg("'%s' is not TCP only", not_only[i]);
        }
    }
    assert_int_equal(tnt_ucx_transports_tcp_only(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_included),
        cmocka_unit_test(test_tcp_left_out),
        cmocka_unit_test(test_tcp_only_transports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
