// SPDX-License-Identifier: Apache-2.0
// libibverbs exports compat versions (@IBVERBS_1.0) beside the default ones
// (@@IBVERBS_1.1), in either .dynsym order: probes must land on the default.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "causeway/discover/elf_symbols.h"

using causeway::discover::ElfSymbols;

TEST(VerbsSymbols, VersionedNamesResolveToTheDefaultVersion) {
  const std::string lib = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";
  void* h = dlopen(lib.c_str(), RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  auto t = ElfSymbols::open(lib);
  ASSERT_NE(t, nullptr);
  // Debian's libibverbs maps .text at file offset == vaddr, so the file
  // offset of a function is its address minus the load base.
  for (const char* name : {"ibv_create_qp", "ibv_ack_async_event", "ibv_get_async_event",
                           "ibv_modify_qp", "ibv_destroy_qp"}) {
    void* def = dlvsym(h, name, "IBVERBS_1.1");
    void* compat = dlvsym(h, name, "IBVERBS_1.0");
    ASSERT_NE(def, nullptr) << name;
    ASSERT_NE(compat, nullptr) << name;
    ASSERT_NE(def, compat) << name;
    Dl_info info{};
    ASSERT_NE(dladdr(def, &info), 0);
    const auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    EXPECT_EQ(t->offset_of_vaddr(t->symbol_value(name).value_or(0)), reinterpret_cast<uintptr_t>(def) - base) << name;
  }
  dlclose(h);
}
