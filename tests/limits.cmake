# The tree's size and shape limits (scripts/check_limits.py; README.md,
# "Contributing"): files, functions, READMEs and docs within their lengths,
# no loop of files calling each other in the library or the command (nm of
# their objects); what broke a limit before the check existed is listed in
# scripts/limits-known.tsv and may only shrink.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME limits
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/check_limits.py ${CMAKE_SOURCE_DIR}
    ${CMAKE_BINARY_DIR}/CMakeFiles/shardbench_obj.dir ${CMAKE_BINARY_DIR}/CMakeFiles/shardbench.dir)
set_tests_properties(limits PROPERTIES TIMEOUT 120)
# Commit subjects since the rule came in (scripts/check_commits.sh): at most
# 72 characters, `area: what`. Skipped (exit 77, reported as not run) when
# the clone's history does not reach that commit (a shallow clone).
add_test(NAME limits_commits
  COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check_commits.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(limits_commits PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)
