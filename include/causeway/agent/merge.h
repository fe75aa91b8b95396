// SPDX-License-Identifier: Apache-2.0
#pragma once
// `causeway merge OUT IN...`: writes a trace, as the agent does, through the
// store's merge (store/merge.h: sessions renumbered, dictionaries remapped,
// a session already in OUT skipped). Present runs it from here: it reads
// store/ through the opener alone.
#include "causeway/store/merge.h"

namespace causeway::agent {

using store::MergeResult;
using store::merge_traces;

}  // namespace causeway::agent
