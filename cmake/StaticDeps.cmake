# libbpf, libelf, zlib, zstd (libelf's compressed sections) and SQLite are
# linked from their Debian static archives so that `ldd causeway` lists only
# glibc. Imported by full path: find_library would prefer the .so.
set(CAUSEWAY_STATIC_LIBS bpf elf z zstd sqlite3)
add_library(causeway_static_deps INTERFACE)
foreach(lib ${CAUSEWAY_STATIC_LIBS})
  find_library(CAUSEWAY_LIB_${lib} NAMES lib${lib}.a REQUIRED)
  target_link_libraries(causeway_static_deps INTERFACE ${CAUSEWAY_LIB_${lib}})
endforeach()
# glibc pieces SQLite needs; glibc itself stays dynamic (NSS, dlopen).
target_link_libraries(causeway_static_deps INTERFACE m dl)
