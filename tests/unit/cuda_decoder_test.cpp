// SPDX-License-Identifier: Apache-2.0
// src/consume/cuda_decoder.cpp: raw library-call records, as the BPF program
// emits them, into cuda_call_events rows (argument positions from the op
// table; structs are the public CUDA ABI).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "causeway/common/op_table.h"
#include "causeway/consume/cuda_decoder.h"

using namespace causeway;

namespace {

// Decodes records of this process (kernel-name strings are read from it).
struct Decoder {
  consume::CudaDecoder d;
  model::Batch batch;
  const uint32_t pid = uint32_t(getpid());

  model::CudaCall& decode(const char* op_name, cw_call_event e) {
    const OpSpec* op = find_op(op_name);
    EXPECT_NE(op, nullptr) << op_name;
    e.hdr.pid = e.hdr.tid = pid;
    e.op = op->id;
    consume::DecodeContext ctx{1000, std::nullopt, batch};
    d.decode(e, *op, ctx);
    return batch.of<model::CudaCall>().back();
  }
};

cw_call_event call(std::initializer_list<uint64_t> args, int64_t ret = 0) {
  cw_call_event e{};
  size_t i = 0;
  for (uint64_t a : args) e.args[i++] = a;
  e.ret = ret;
  e.dur_ns = 5000;
  return e;
}

}  // namespace

TEST(CudaDecoder, AllocationsAndTheFreesThatMatchThem) {
  Decoder t;
  auto m = call({0x7fff0000, 1 << 20});  // cudaMalloc(&p, 1 MiB) -> p = 0xdead0000
  m.out_value = 0xdead0000;
  EXPECT_EQ(t.decode("cudaMalloc", m).bytes, 1 << 20);
  // A free of that pointer reports the allocation's size, once.
  EXPECT_EQ(t.decode("cudaFree", call({0xdead0000})).bytes, 1 << 20);
  EXPECT_FALSE(t.decode("cudaFree", call({0xdead0000})).bytes.has_value());
  // A failed allocation (cudaErrorMemoryAllocation = 2) is no live allocation.
  auto failed = call({0x7fff0000, 1 << 30}, 2);
  failed.out_value = 0xbeef0000;
  auto& row = t.decode("cudaMalloc", failed);
  EXPECT_EQ(row.ret, 2);
  EXPECT_FALSE(t.decode("cudaFree", call({0xbeef0000})).bytes.has_value());
}

TEST(CudaDecoder, CopiesHaveBytesAndDirection) {
  Decoder t;
  // cudaMemcpy(dst, src, n, kind=2 DtoH); cudaMemcpyAsync(..., kind=1, stream)
  auto& c = t.decode("cudaMemcpy", call({1, 2, 4096, 2}));
  EXPECT_EQ(c.bytes, 4096);
  EXPECT_EQ(c.kind, int(CopyKind::DtoH));
  auto& a = t.decode("cudaMemcpyAsync", call({1, 2, 8192, 1, 0x5000}));
  EXPECT_EQ(a.kind, int(CopyKind::HtoD));
  EXPECT_EQ(a.stream, 0x5000u);
  // A kind outside cudaMemcpyKind is not guessed.
  EXPECT_FALSE(t.decode("cudaMemcpy", call({1, 2, 16, 9})).kind.has_value());
  // The driver's copies imply their direction.
  EXPECT_EQ(t.decode("cuMemcpyDtoH", call({1, 2, 64})).kind, int(CopyKind::DtoH));
  EXPECT_EQ(t.decode("cuMemcpyHtoDAsync", call({1, 2, 64, 0x77})).stream, 0x77u);
}

TEST(CudaDecoder, LaunchesHaveTheirGeometryAndKernelName) {
  Decoder t;
  static const char name[] = "vector_add(float*, float const*, int)";
  // __cudaRegisterFunction(handle, hostFun = 0x4000, deviceFun, deviceName)
  t.decode("__cudaRegisterFunction", call({0x1, 0x4000, 0x2, uint64_t(name)}));
  // cudaLaunchKernel(0x4000, grid {4, 2, 1}, block {256, 1, 1}, args, smem = 1024, stream)
  auto e = call({0x4000, 4 | (2ull << 32), 1, 256 | (1ull << 32), 1});
  e.flags = CW_CALL_HAS_STACK;
  e.stack[0] = 1024;
  e.stack[1] = 0x9000;
  auto& l = t.decode("cudaLaunchKernel", e);
  EXPECT_EQ(l.grid, (model::Dim3{4, 2, 1}));
  EXPECT_EQ(l.block, (model::Dim3{256, 1, 1}));
  EXPECT_EQ(l.shared_mem, 1024u);
  EXPECT_EQ(l.stream, 0x9000u);
  EXPECT_EQ(l.kernel, name);

  // Driver: cuModuleGetFunction names the CUfunction it returns.
  static const char dname[] = "gemm_kernel";
  auto g = call({0x7fff0000, 0x1, uint64_t(dname)});
  g.out_value = 0xf00d;
  EXPECT_EQ(t.decode("cuModuleGetFunction", g).kernel, dname);
  // cuLaunchKernel(f, gx, gy, gz, bx, by, [bz, smem, stream on the stack])
  auto d = call({0xf00d, 8, 1, 1, 128, 2});
  d.flags = CW_CALL_HAS_STACK;
  d.stack[0] = 1;
  d.stack[1] = 0;
  d.stack[2] = 0x33;
  auto& dl = t.decode("cuLaunchKernel", d);
  EXPECT_EQ(dl.grid, (model::Dim3{8, 1, 1}));
  EXPECT_EQ(dl.block, (model::Dim3{128, 2, 1}));
  EXPECT_EQ(dl.stream, 0x33u);
  EXPECT_EQ(dl.kernel, dname);

  // cuLaunchKernelEx: CUlaunchConfig read behind arg0, the CUfunction in arg1.
  auto x = call({0x1234, 0xf00d});
  x.flags = CW_CALL_HAS_DEREF;
  const uint32_t cfg[7] = {16, 1, 1, 64, 1, 1, 512};
  std::memcpy(x.deref, cfg, sizeof cfg);
  const uint64_t stream = 0x44;
  std::memcpy(x.deref + 32, &stream, 8);
  auto& xl = t.decode("cuLaunchKernelEx", x);
  EXPECT_EQ(xl.grid, (model::Dim3{16, 1, 1}));
  EXPECT_EQ(xl.shared_mem, 512u);
  EXPECT_EQ(xl.stream, 0x44u);
  EXPECT_EQ(xl.kernel, dname);
}

TEST(CudaDecoder, ReturnCodesAre32Bit) {
  Decoder t;
  // A cudaError_t in a 64-bit register with garbage above bit 31.
  auto& r = t.decode("cudaDeviceSynchronize", call({}, int64_t(0xffffffff00000023ull)));
  EXPECT_EQ(r.ret, 35);
  EXPECT_EQ(r.dur_ns, 5000);
  EXPECT_EQ(r.ts_ns, 1000);
}

// cuMemsetD32(dst, value, count): count words of 4 bytes. A count no memory
// could hold (a damaged record) leaves no size instead of a wrapped one.
TEST(CudaDecoder, MemsetsCountTheirElementsWidth) {
  Decoder t;
  EXPECT_EQ(t.decode("cuMemsetD32", call({0x1000, 7, 1024})).bytes, 4096);
  EXPECT_FALSE(t.decode("cuMemsetD32", call({0x1000, 7, 0x3f00000000000000ULL})).bytes.has_value());
}

// A JIT's kernel name (CuPy's RawKernel through nvrtc) is a temporary: read
// after cuModuleGetFunction returns, its bytes are freed memory or another
// string. The name's first CW_DEREF_BYTES read at entry name the function;
// a long name the process still holds is kept whole.
TEST(CudaDecoder, AKernelNameFreedAfterTheCallIsTheOneReadAtEntry) {
  Decoder t;
  static char reused[64] = "another_name_now";
  auto g = call({0x7fff0000, 0x1, uint64_t(reused)});
  g.flags = CW_CALL_HAS_DEREF;
  std::strcpy(reinterpret_cast<char*>(g.deref), "spin_forever");
  g.out_value = 0xbeef;
  EXPECT_EQ(t.decode("cuModuleGetFunction", g).kernel, "spin_forever");
  auto l = call({0xbeef, 1, 1, 1, 32, 1});
  EXPECT_EQ(t.decode("cuLaunchKernel", l).kernel, "spin_forever");
  // Unreadable after the call (unmapped): the entry's bytes.
  auto gone = call({0x7fff0000, 0x1, 0x10});
  gone.flags = CW_CALL_HAS_DEREF;
  std::strcpy(reinterpret_cast<char*>(gone.deref), "jit_kernel_2");
  gone.out_value = 0xbef0;
  EXPECT_EQ(t.decode("cuLibraryGetKernel", gone).kernel, "jit_kernel_2");
  // A name longer than the entry's bytes, still held: whole.
  static const char lng[] =
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_";
  auto whole = call({0x7fff0000, 0x1, uint64_t(lng)});
  whole.flags = CW_CALL_HAS_DEREF;
  std::memcpy(whole.deref, lng, sizeof whole.deref);
  whole.out_value = 0xbef1;
  EXPECT_EQ(t.decode("cuLibraryGetKernel", whole).kernel,
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> "
            ">(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)");  // demangled
  // Freed and longer than the entry's bytes: cut, and said so.
  auto cut = call({0x7fff0000, 0x1, 0x10});
  cut.flags = CW_CALL_HAS_DEREF;
  std::memcpy(cut.deref, lng, sizeof cut.deref);
  cut.out_value = 0xbef2;
  EXPECT_EQ(t.decode("cuLibraryGetKernel", cut).kernel, std::string(lng, sizeof cut.deref) + "...");
}

