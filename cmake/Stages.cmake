# The pipeline's stages (docs/architecture.md), each a static library of
# src/<stage>/, in data-flow order. A stage sees the shared headers
# (events.h, common/, model/) and the headers of the stages before it, and
# no others: its include path is a folder of links to exactly those
# (build/stage-include/<stage>/causeway/), so including a later stage's
# header fails to compile. Each links the stages before it, by name.
set(CAUSEWAY_STAGES common discover attach consume store agent analyze demo export present)
set(CAUSEWAY_SHARED_HEADERS events.h common model)

add_library(causeway_build_flags INTERFACE)
target_compile_definitions(causeway_build_flags INTERFACE
  SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY CAUSEWAY_VERSION="${PROJECT_VERSION}")
# The generated model list (causeway/model/all_tables.h) lives here.
target_include_directories(causeway_build_flags INTERFACE ${CMAKE_BINARY_DIR}/generated)
target_link_libraries(causeway_build_flags INTERFACE causeway_static_deps Threads::Threads)

set(earlier "")
set(visible ${CAUSEWAY_SHARED_HEADERS})
foreach(stage ${CAUSEWAY_STAGES})
  if(NOT stage STREQUAL "common")
    list(APPEND visible ${stage})
  endif()
  set(farm ${CMAKE_BINARY_DIR}/stage-include/${stage})
  file(REMOVE_RECURSE ${farm})
  file(MAKE_DIRECTORY ${farm}/causeway)
  foreach(entry ${visible})
    if(EXISTS ${CMAKE_SOURCE_DIR}/include/causeway/${entry})
      file(CREATE_LINK ${CMAKE_SOURCE_DIR}/include/causeway/${entry} ${farm}/causeway/${entry} SYMBOLIC)
    endif()
  endforeach()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${stage}/*.cpp)
  add_library(causeway_${stage} STATIC ${sources})
  target_include_directories(causeway_${stage} PRIVATE ${farm})
  target_link_libraries(causeway_${stage} PUBLIC causeway_build_flags ${earlier})
  list(PREPEND earlier causeway_${stage})
endforeach()
# Stage extras: the BPF skeletons are attach's alone; the migrations are the store's.
add_dependencies(causeway_attach causeway_bpf)
target_include_directories(causeway_attach PRIVATE ${CMAKE_BINARY_DIR}/generated/skel)
target_sources(causeway_store PRIVATE ${CMAKE_BINARY_DIR}/generated/schema_sql.cpp)

# Everything, for the binary, the tests and the benchmarks.
add_library(causeway_core INTERFACE)
target_link_libraries(causeway_core INTERFACE causeway_present)
target_include_directories(causeway_core INTERFACE ${CMAKE_SOURCE_DIR}/include)
