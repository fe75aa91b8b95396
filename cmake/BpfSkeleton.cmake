# Compile one bpf/*.bpf.c with clang (BPF target, CO-RE) and turn it into a
# libbpf skeleton header with bpftool. The vmlinux.h used is the committed one
# in bpf/vmlinux/<arch>/ so the build does not depend on the build host's BTF
# (CO-RE relocates field offsets against the target kernel at load time).
find_program(CLANG_BPF NAMES clang clang-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)
find_program(LLVM_STRIP NAMES llvm-strip llvm-strip-14 REQUIRED)

execute_process(COMMAND uname -m OUTPUT_VARIABLE CAUSEWAY_ARCH OUTPUT_STRIP_TRAILING_WHITESPACE)
if(CAUSEWAY_ARCH STREQUAL "x86_64")
  set(CAUSEWAY_BPF_ARCH x86)
elseif(CAUSEWAY_ARCH STREQUAL "aarch64")
  set(CAUSEWAY_BPF_ARCH arm64)
else()
  message(FATAL_ERROR "unsupported architecture ${CAUSEWAY_ARCH}")
endif()
set(CAUSEWAY_VMLINUX_DIR ${CMAKE_SOURCE_DIR}/bpf/vmlinux/${CAUSEWAY_ARCH})
if(NOT EXISTS ${CAUSEWAY_VMLINUX_DIR}/vmlinux.h)
  message(FATAL_ERROR "no vmlinux.h for ${CAUSEWAY_ARCH}: generate it with "
    "`bpftool btf dump file /sys/kernel/btf/vmlinux format c > ${CAUSEWAY_VMLINUX_DIR}/vmlinux.h`")
endif()

function(causeway_bpf_skeleton src out_var)
  get_filename_component(name ${src} NAME)
  string(REPLACE ".bpf.c" "" name ${name})
  set(obj ${CMAKE_BINARY_DIR}/bpf/${name}.bpf.o)
  set(skel ${CMAKE_BINARY_DIR}/generated/skel/${name}.skel.h)
  file(GLOB bpf_headers ${CMAKE_SOURCE_DIR}/bpf/*.h)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/bpf ${CMAKE_BINARY_DIR}/generated/skel
    COMMAND ${CLANG_BPF} -g -O2 -target bpf -D__TARGET_ARCH_${CAUSEWAY_BPF_ARCH}
            -Wall -Wno-unused-function -Wno-compare-distinct-pointer-types
            -I${CAUSEWAY_VMLINUX_DIR} -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/bpf
            -c ${src} -o ${obj}.tmp
    # keep BTF (CO-RE needs it), drop DWARF: a smaller embedded object
    COMMAND ${LLVM_STRIP} -g ${obj}.tmp -o ${obj}
    COMMAND ${BPFTOOL} gen skeleton ${obj} name ${name}_bpf > ${skel}
    DEPENDS ${src} ${bpf_headers} ${CMAKE_SOURCE_DIR}/include/causeway/events.h
    COMMENT "BPF ${name}.bpf.c -> ${name}.skel.h"
    VERBATIM)
  set(${out_var} ${skel} PARENT_SCOPE)
endfunction()
