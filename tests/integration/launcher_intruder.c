/*
 * An intruder for the launcher's admission tests: a process the launcher did
 * not start, trying to join its PMIx server and kill the job.
 *
 *   launcher_intruder client       PMIx_Init with the PMIX_* environment the
 *                                  test gives it (a rank's namespace, rank
 *                                  and server URI)
 *   launcher_intruder tool URI     PMIx_tool_init against server URI
 *
 * Once in, it reads the job size and calls PMIx_Abort(7, "intruder abort").
 * Exit status: 0 = it got in (the attack worked), 3 = it was refused. Run
 * it with LD_PRELOAD=launcher_uid_lie.so to claim uid 0 in the handshake.
 */
#include <stdio.h>
#include <string.h>

#include <pmix.h>
#include <pmix_tool.h>

static int attack(const pmix_proc_t *me)
{
    pmix_value_t *val = NULL;
    pmix_proc_t wildcard;
    pmix_status_t rc;

    PMIX_LOAD_PROCID(&wildcard, me->nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&wildcard, PMIX_JOB_SIZE, NULL, 0, &val);
    if (rc != PMIX_SUCCESS) {
        printf("intruder: refused after the handshake: Get(PMIX_JOB_SIZE): %s\n",
               PMIx_Error_string(rc));
        return 3;
    }
    printf("intruder: joined %s as rank %u, job size %u\n", me->nspace, me->rank, val->data.uint32);
    PMIX_VALUE_RELEASE(val);
    fflush(stdout);
    rc = PMIx_Abort(7, "intruder abort", NULL, 0);
    printf("intruder: PMIx_Abort returned %s\n", PMIx_Error_string(rc));
    return 0;
}

int main(int argc, char **argv)
{
    pmix_status_t rc;
    pmix_proc_t me;
    int status;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 2 && strcmp(argv[1], "client") == 0) {
        rc = PMIx_Init(&me, NULL, 0);
        if (rc != PMIX_SUCCESS) {
            printf("intruder: refused: PMIx_Init: %s\n", PMIx_Error_string(rc));
            return 3;
        }
        status = attack(&me);
        PMIx_Finalize(NULL, 0);
        return status;
    }
    if (argc == 3 && strcmp(argv[1], "tool") == 0) {
        pmix_info_t info[3];
        pmix_rank_t rank = 0;

        PMIX_INFO_LOAD(&info[0], PMIX_SERVER_URI, argv[2], PMIX_STRING);
        PMIX_INFO_LOAD(&info[1], PMIX_TOOL_NSPACE, "intruder-tool", PMIX_STRING);
        PMIX_INFO_LOAD(&info[2], PMIX_TOOL_RANK, &rank, PMIX_PROC_RANK);
        rc = PMIx_tool_init(&me, info, 3);
        if (rc != PMIX_SUCCESS) {
            printf("intruder: refused: PMIx_tool_init: %s\n", PMIx_Error_string(rc));
            return 3;
        }
        rc = PMIx_Abort(7, "intruder abort", NULL, 0);
        printf("intruder: tool connected; PMIx_Abort returned %s\n", PMIx_Error_string(rc));
        PMIx_tool_finalize();
        return rc == PMIX_SUCCESS ? 0 : 3;
    }
    fprintf(stderr, "usage: launcher_intruder client | tool URI\n");
    return 2;
}
