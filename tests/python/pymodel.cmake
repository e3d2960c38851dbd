# pytest suites of the pymodel component (tnt.Model, callbacks, model I/O,
# preemption and BackupAndRestore, the digits example, what ports from DDP
# and Horovod rely on). One ctest test per
# file; pytest exits 5 when it collects nothing, which fails the test like any other non-zero exit.
# Budget: about 4 minutes together on the 2-core CI machine.
set(_tnt_pymodel_suites model callbacks save model_inputs clipping preemption porting untrusted
  torch_distributed ported tnt_backend rendezvous autotune timeline)
set(_tnt_pymodel_timeout_model 300)
# Multi-rank runs with DataLoader workers, 1-vs-3-rank seeds, the porting
# example with a resume; generous for an oversubscribed 2-core machine.
set(_tnt_pymodel_timeout_model_inputs 600)
set(_tnt_pymodel_timeout_clipping 600)
set(_tnt_pymodel_timeout_callbacks 180)
set(_tnt_pymodel_timeout_save 180)
# preemption: about 12 launcher runs of 2-4 ranks (85 s unloaded).
set(_tnt_pymodel_timeout_preemption 600)
# untrusted: in-process fits and loads, one 2-rank predict (about 10 s unloaded).
set(_tnt_pymodel_timeout_untrusted 180)
# porting: 3- and 4-rank DataLoader runs (about 15 s unloaded).
set(_tnt_pymodel_timeout_porting 300)
# torch_distributed: unmodified DDP on 2, 2 and 3 ranks plus four short
# launcher runs (about 40 s unloaded).
set(_tnt_pymodel_timeout_torch_distributed 300)
# ported: Horovod's synthetic benchmark (ResNet-18, 32x32, 2 ranks) and
# mnist on digits (1 epoch on 2 ranks and on 1): about 60 s unloaded.
set(_tnt_pymodel_timeout_ported 600)
# tnt_backend: DDP on 2 and 3 ranks, every op on 2 and 3 ranks and 2
# torchrun-style, the bad inputs, four short interpreters (about 30 s
# unloaded).
set(_tnt_pymodel_timeout_tnt_backend 300)
# rendezvous: DDP through tnt:// on gloo and tnt (2-4 ranks, five launcher
# runs) and one single-process run (about 40 s unloaded).
set(_tnt_pymodel_timeout_rendezvous 400)
# autotune: tuned vs fixed bitwise on 2 and 3 ranks and 2 and 3 simulated
# nodes, the 3-node order checks, injected timings (40 s on the loaded
# 2-core machine).
set(_tnt_pymodel_timeout_autotune 300)
# timeline: two 2-rank fits with a timeline, the summary tool and its PNG
# (about 20 s unloaded).
set(_tnt_pymodel_timeout_timeline 300)
foreach(_suite ${_tnt_pymodel_suites})
  add_test(NAME python.${_suite}
    COMMAND ${TNT_TEST_PYTHON} -m pytest -q -p no:cacheprovider
            ${CMAKE_CURRENT_SOURCE_DIR}/test_${_suite}.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(python.${_suite} PROPERTIES
    TIMEOUT ${_tnt_pymodel_timeout_${_suite}}
    LABELS python
    ENVIRONMENT "TNT_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONPATH=${PROJECT_BINARY_DIR}/python;OMP_NUM_THREADS=1")
endforeach()
# Whether configure built tarantella._tnt_torch (python/torch_backend.cmake):
# the suite checks that the package agrees.
set_property(TEST python.tnt_backend APPEND PROPERTY ENVIRONMENT
  "TNT_TORCH_BACKEND_BUILT=$<IF:$<BOOL:${TNT_TORCH_BACKEND_BUILT}>,ON,OFF>")
