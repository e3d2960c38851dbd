# Extra wiring for the SPANK plugin's unit tests. unit.cmake creates one
# binary per tests/unit/test_*.c; these two need more, which is added once
# that has happened (deferred to the end of this directory):
#  - test_spank_args compiles spank/args.c (pure parsing, no Slurm);
#  - test_spank_host is a fake SPANK host: it exports the spank_* and slurm_*
#    functions the plugin calls (ENABLE_EXPORTS) and dlopens the built
#    spank_tarantella.so, whose path it gets at compile time.
function(_tnt_spank_unit_wiring)
  if(TARGET test_spank_args)
    target_sources(test_spank_args PRIVATE ${PROJECT_SOURCE_DIR}/spank/args.c)
  endif()
  if(TARGET test_spank_host)
    if(TARGET spank_tarantella)
      set_target_properties(test_spank_host PROPERTIES ENABLE_EXPORTS ON)
      target_include_directories(test_spank_host PRIVATE ${SLURM_INCLUDE_DIR})
      target_compile_definitions(test_spank_host PRIVATE
        TNT_SPANK_PLUGIN_PATH="$<TARGET_FILE:spank_tarantella>")
      target_link_libraries(test_spank_host PRIVATE ${CMAKE_DL_LIBS})
      add_dependencies(test_spank_host spank_tarantella)
    else()
      # Built without the plugin (TNT_WITH_SPANK=OFF): nothing to load.
      set_tests_properties(unit.test_spank_host PROPERTIES DISABLED TRUE)
    endif()
  endif()
endfunction()
cmake_language(DEFER CALL _tnt_spank_unit_wiring)
