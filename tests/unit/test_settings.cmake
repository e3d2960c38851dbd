# The settings parser's variable names against the one table of
# docs/environment.md (test_settings itself is registered by unit.cmake,
# which is included after this fragment; a target may be named before it
# exists).
add_test(NAME unit.settings_doc
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_settings_doc.sh $<TARGET_FILE:test_settings>
          ${PROJECT_SOURCE_DIR}/docs/environment.md)
set_tests_properties(unit.settings_doc PROPERTIES TIMEOUT 30 LABELS unit)
