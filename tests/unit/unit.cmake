# One cmocka binary per module: tests/unit/test_<module>.c. They link the
# static libtnt (internal symbols) and the pinning library.
file(GLOB _unit_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_*.c)
foreach(_src ${_unit_sources})
  get_filename_component(_name ${_src} NAME_WE)
  add_executable(${_name} ${_src})
  target_link_libraries(${_name} PRIVATE tnt_static tnt_topo ${CMOCKA_LIBRARY})
  target_include_directories(${_name} PRIVATE ${PROJECT_SOURCE_DIR}/libtnt/src ${PROJECT_SOURCE_DIR})
  add_test(NAME unit.${_name} COMMAND ${_name})
  set_tests_properties(unit.${_name} PROPERTIES TIMEOUT 60 LABELS unit)
endforeach()
