#!/usr/bin/env bash
# gpu_double_asan.sh SOURCE_DIR BUILD_DIR
# Builds libtnt, the launcher, libtnt_cuda.so, the GPU test doubles and the
# device checks with AddressSanitizer (and LeakSanitizer) in BUILD_DIR, then
# runs the gpu-double label there: no invalid access, and no leak of
# libtnt's, the plugin's or the doubles' memory (third-party libraries'
# exit-time allocations are suppressed: tests/common/lsan.supp). Exit 77
# when the compiler cannot link -fsanitize=address.
set -uo pipefail
src=$1 build=$2
echo 'int main(void){return 0;}' | cc -x c -fsanitize=address -o /dev/null - 2>/dev/null ||
    { echo "SKIPPED: cc cannot link -fsanitize=address"; exit 77; }
targets=(tnt tarantella tnt_cuda tnt_cudart_double tnt_nccl_double tnt_nccl_double_unusable
         gpu_collectives_check gpu_composed_check gpu_exchange_check gpu_unsupported_check
         gpu_double_cycles)
cmake -S "$src" -B "$build" -DTNT_SANITIZE=address -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTNT_WITH_PYTHON=OFF -DTNT_WITH_SPANK=OFF >"$build.log" 2>&1 &&
cmake --build "$build" -j 2 --target "${targets[@]}" >>"$build.log" 2>&1 ||
    { tail -40 "$build.log"; echo "gpu_double_asan: the sanitizer build failed"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:abort_on_error=0
export LSAN_OPTIONS=suppressions=$src/tests/common/lsan.supp
ctest --test-dir "$build" -L gpu-double -E asan --output-on-failure --timeout 600
