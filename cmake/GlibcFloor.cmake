# The release build's glibc floor (issue 68; docs/building.md): built on
# Debian 12 (glibc 2.36), a binary that starts on glibc FLOOR and newer.
#   -DCAUSEWAY_RELEASE_GLIBC_FLOOR=2.28   (.ci/release sets it; empty: off)
# cmake/glibc_floor_<FLOOR>.list names every glibc symbol the binary would
# need at a newer version: `SYMBOL VERSION` binds it to that older version
# through a generated trampoline, `SYMBOL -` is one the floor lacks, written
# in src/compat/glibc_floor.c. Every reference, in our code and in the static
# archives alike (libstdc++, libgcc_eh, libbpf, SQLite), reaches them through
# `-Wl,--wrap=SYMBOL`. tests/install/glibc_floor.py checks the result and
# `--suggest` writes the list's lines for symbols that crept in.
set(CAUSEWAY_RELEASE_GLIBC_FLOOR "" CACHE STRING
    "Bind the binary's glibc symbols to this version or older (release builds: 2.28); empty: the host's glibc")

# causeway_glibc_floor(TARGET FLOOR): TARGET's glibc symbols at FLOOR or older.
function(causeway_glibc_floor target floor)
  if(NOT CMAKE_SYSTEM_PROCESSOR STREQUAL "x86_64")
    message(FATAL_ERROR "glibc floor: the symbol list is x86-64's (this is ${CMAKE_SYSTEM_PROCESSOR})")
  endif()
  set(list ${CMAKE_SOURCE_DIR}/cmake/glibc_floor_${floor}.list)
  if(NOT EXISTS ${list})
    message(FATAL_ERROR "glibc floor ${floor}: no ${list} (floors with a list: 2.28)")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${list})
  file(STRINGS ${list} lines REGEX "^[^#]")
  set(binds "/* generated from cmake/glibc_floor_${floor}.list by cmake/GlibcFloor.cmake */\n")
  set(wraps "")
  foreach(line ${lines})
    string(REGEX MATCH "^([A-Za-z0-9_]+)[ \t]+(GLIBC_[0-9.]+|-)[ \t]*$" ok "${line}")
    if(NOT ok)
      message(FATAL_ERROR "${list}: cannot read the line '${line}' (SYMBOL VERSION or SYMBOL -)")
    endif()
    set(sym ${CMAKE_MATCH_1})
    list(APPEND wraps "-Wl,--wrap=${sym}")
    if(NOT CMAKE_MATCH_2 STREQUAL "-")
      # A tail jump: any signature, varargs included, reaches the old version.
      string(APPEND binds "__asm__(\".globl __wrap_${sym}\\n.type __wrap_${sym},@function\\n__wrap_${sym}:\\n\"\n"
                          "        \"  jmp cw_old_${sym}@PLT\\n.symver cw_old_${sym},${sym}@${CMAKE_MATCH_2}\");\n")
    endif()
  endforeach()
  set(out ${CMAKE_BINARY_DIR}/generated/glibc_floor_${floor}_binds.c)
  file(CONFIGURE OUTPUT ${out} CONTENT "${binds}")
  target_sources(${target} PRIVATE ${out} ${CMAKE_SOURCE_DIR}/src/compat/glibc_floor.c)
  # Before 2.34 the pthread, dl and rt functions lived in their own libraries:
  # on an old glibc the old versions are found there (stubs on a new one).
  # libm: every trampoline's target must be linked, exp's too.
  # (One token: CMake folds repeated link options.)
  target_link_options(${target} PRIVATE ${wraps}
                      "-Wl,--push-state,--no-as-needed,-l:libpthread.so.0,-l:libdl.so.2,-l:librt.so.1,-l:libm.so.6,--pop-state")
endfunction()
