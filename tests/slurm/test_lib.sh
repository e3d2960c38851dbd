# Sourced by the SLURM end-to-end test scripts (spank_e2e.sh, templates.sh).
#
# tnt_test_workdir PREFIX: creates a private work directory in $WORK, and on
# exit removes it; on failure it first cancels our pending jobs, which would
# otherwise block the next test on this small cluster.
tnt_test_workdir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    trap tnt_test_cleanup EXIT
}

tnt_test_cleanup() {
    local rc=$?
    if [ $rc -ne 0 ]; then
        timeout 20 scancel --state=PENDING --user="$(id -un)" 2>/dev/null || true
    fi
    rm -rf "$WORK"
    exit $rc
}
