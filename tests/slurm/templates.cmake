# The sbatch templates (sbatch-templates/*.sbatch) on the test cluster: the
# CPU ones train the digits example with `sbatch --wait` (or run the C check
# when the Python package is not built), the GPU one goes through
# `sbatch --test-only`. About 40 s together. The preemptible one is
# interrupted, requeued and resumed (below).
if(TARGET spank_tarantella)
  if(TARGET tnt_python OR TARGET tnt_pyext)
    set(_tnt_templates_pypath ${PROJECT_BINARY_DIR}/python)
  else()
    set(_tnt_templates_pypath -)
  endif()
  foreach(_template single-node-cpu multi-node-cpu multi-node-gpu)
    tnt_add_slurm_test(NAME slurm.template.${_template} TIMEOUT 180
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/templates.sh ${_template} ${PROJECT_SOURCE_DIR}
              ${_tnt_templates_pypath} $<TARGET_FILE:slurm_allreduce_check>)
  endforeach()
  # Signalled, backed up, requeued, resumed, compared with an uninterrupted
  # run: two jobs of 12 digits epochs (20-50 s here; its bounded waits add
  # up to under 600 s).
  tnt_add_slurm_test(NAME slurm.template.preemptible TIMEOUT 600
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/templates.sh preemptible ${PROJECT_SOURCE_DIR}
            ${_tnt_templates_pypath} $<TARGET_FILE:slurm_allreduce_check>)
endif()
