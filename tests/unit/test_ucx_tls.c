/*
 * Which UCX_TLS values let UCX use its TCP transport
 * (transport/ucx/ucx.c, tnt_ucx_tls_includes_tcp). libtnt sets UCX's TCP
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
        NULL,     "",        "all",         "tcp",          "tcp,self",  "rc,sm,tcp,self",
        "TCP",    "ALL,self", "rc,tcp:aux", "^rc,sm",       "^ib",       "^rc_mlx5,ud",
        "sm,all",
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
        "rc,sm,self", "dc,sm,self", "ud,self", "^tcp", "^tcp,sm", "^rc,tcp:aux",
        "sm",         "self",       "tcpx",    "rc_tcp", "posix,self",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(without_tcp) / sizeof(without_tcp[0]); i++) {
        if (tnt_ucx_tls_includes_tcp(without_tcp[i])) {
            fail_msg("UCX_TLS=%s leaves TCP out", without_tcp[i]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_included),
        cmocka_unit_test(test_tcp_left_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
