// SPDX-License-Identifier: Apache-2.0
#pragma once
// `causeway merge OUT IN...`: several nodes' trace files into one, so ranks on
// different hosts can be compared. Each input is opened read-only and its
// schema checked (newer than this binary: UsageError, nothing written). Its
// sessions get new ids in OUT, rows are copied with the new session_id, and
// dictionary ids (kernels, comms, stacks) are remapped. A session already in
// OUT, identified by (host, boot_id, start_ts_ns), is skipped: merging the
// same input twice adds nothing.
#include <cstdint>
#include <string>
#include <vector>

namespace causeway::store {

struct MergeResult {
  int sessions_added = 0;
  int sessions_skipped = 0;  // already in OUT
  int64_t rows_copied = 0;
};

MergeResult merge_traces(const std::string& out_path, const std::vector<std::string>& inputs);

}  // namespace causeway::store
