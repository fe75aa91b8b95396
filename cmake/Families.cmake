# The record families of include/causeway/model/: every header there that
# declares a table ends the declaration with CAUSEWAY_TABLE(Name). This lists
# them, in file-name order, into build/generated/causeway/model/all_tables.h,
# so that adding a family is adding its header (docs/architecture.md): the
# store, retention, merge, explain's window and the schema check take their
# table lists from there.
file(GLOB CAUSEWAY_MODEL_HEADERS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/causeway/model/*.h)
list(SORT CAUSEWAY_MODEL_HEADERS)
# A new CAUSEWAY_TABLE line in an existing header re-runs this too.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CAUSEWAY_MODEL_HEADERS})
set(CAUSEWAY_MODEL_INCLUDES "")
set(CAUSEWAY_MODEL_TABLES "")
foreach(header ${CAUSEWAY_MODEL_HEADERS})
  file(STRINGS ${header} lines REGEX "^CAUSEWAY_TABLE\\(")
  if(NOT lines)
    continue()
  endif()
  get_filename_component(name ${header} NAME)
  string(APPEND CAUSEWAY_MODEL_INCLUDES "#include \"causeway/model/${name}\"\n")
  foreach(line ${lines})
    string(REGEX REPLACE "^CAUSEWAY_TABLE\\(([A-Za-z0-9_]+)\\).*" "\\1" table "${line}")
    list(APPEND CAUSEWAY_MODEL_TABLES "model::${table}")
  endforeach()
endforeach()
list(JOIN CAUSEWAY_MODEL_TABLES ",\n    " CAUSEWAY_MODEL_TABLE_LIST)
configure_file(${CMAKE_SOURCE_DIR}/cmake/all_tables.h.in
               ${CMAKE_BINARY_DIR}/generated/causeway/model/all_tables.h @ONLY)
