# `cmake --install` and the .deb (.ci/package): the binary, stripped (its
# debug symbols go beside the .deb as a .debug file); the systemd unit, the man page,
# bash completion and the docs. The binary links only glibc (libbpf, SQLite
# and libstdc++ are static), so the package depends on libc6 alone.
include(GNUInstallDirs)
install(TARGETS causeway RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES packaging/causeway.service DESTINATION lib/systemd/system)
install(FILES packaging/causeway.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME causeway)
install(FILES packaging/causeway.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES README.md LICENSE-APACHE LICENSE-GPL docs/cli.md docs/explain.md docs/schema.md
              docs/performance.md docs/architecture.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME causeway)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "causeway maintainers <causeway@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "explains why GPU workloads are slow (eBPF tracing, local SQLite)")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "causeway attaches eBPF uprobes to the GPU libraries (CUDA, NCCL, HIP, verbs) and kernel\n tracepoints, writes events to a local SQLite file and explains slow or failing GPU work as\n causal chains with the Python line and the fix. Nothing leaves the host.")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
if(CAUSEWAY_RELEASE_GLIBC_FLOOR STREQUAL "")
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= 2.34)")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= ${CAUSEWAY_RELEASE_GLIBC_FLOOR})")
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_LICENSE "Apache-2.0 AND GPL-2.0-only")
set(CPACK_STRIP_FILES ON)
include(CPack)
