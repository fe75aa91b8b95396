// SPDX-License-Identifier: Apache-2.0
// Random ring-buffer records -> EventConsumer::handle, the same entry the
// libbpf callback uses. Input: a stream of [u16 length][bytes] records, so one
// run exercises a sequence (a call's naming record, then the launch using it;
// an exec, then an exit). Seeds (make_fuzz_seeds) are well-formed records
// of every type, so mutations start inside the decoders, not at the switch.
#include <cstdint>
#include <cstring>
#include <vector>

#include "causeway/consume/consumer.h"
#include "causeway/events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  causeway::consume::EventConsumer consumer(0);
  size_t at = 0;
  while (at + 2 <= size) {
    size_t len = size_t(data[at]) | size_t(data[at + 1]) << 8;
    at += 2;
    len = std::min(len, size - at);
    // A copy, aligned like a ring record (8 bytes), exactly len long so ASan
    // sees any read past the record.
    std::vector<uint64_t> aligned((len + 7) / 8 + 1);
    std::memcpy(aligned.data(), data + at, len);
    std::vector<uint8_t> exact(reinterpret_cast<uint8_t*>(aligned.data()),
                               reinterpret_cast<uint8_t*>(aligned.data()) + len);
    consumer.handle(exact.data(), exact.size());
    at += len;
  }
  auto batch = consumer.take_batch();
  return batch.size() > (1u << 30) ? 1 : 0;
}
