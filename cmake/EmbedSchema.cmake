# schema/NNN_name.sql -> one generated C++ source with the migrations in order.
function(causeway_embed_schema out)
  file(GLOB sql_files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/schema/*.sql)
  list(SORT sql_files)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DSCHEMA_DIR=${CMAKE_SOURCE_DIR}/schema
            -P ${CMAKE_SOURCE_DIR}/cmake/GenerateSchema.cmake
    DEPENDS ${sql_files} ${CMAKE_SOURCE_DIR}/cmake/GenerateSchema.cmake
    COMMENT "embedding schema/*.sql")
endfunction()
