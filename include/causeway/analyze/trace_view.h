// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a trace holds, as its viewers show it: export's Perfetto file and the
// report's pages (each family's rows in the window, the processes that name
// the tracks, the slowest calls), MCP's trace_info and call_stack (sessions,
// row counts, drops, a call's stored stack), and the chains placed on the
// timeline (a symptom's slowest call and the host events inside it). store/
// reads them as typed rows; analyze hands them on as they are, so present
// formats and reads nothing but through analyze (and the opener,
// store/read_only_trace.h).
#include "causeway/store/trace_info.h"
#include "causeway/store/trace_rows.h"

namespace causeway::analyze {

// Rows of each family, in time order (trace_rows.h).
using store::CudaCallRow;
using store::Dim3;
using store::IoRequestRow;
using store::MemoryHeldRow;
using store::NcclCallRow;
using store::OffcpuRow;
using store::ReclaimRow;
using store::TcpRetransmitRow;
using store::TensorsHeldRow;
using store::each_cuda_call;
using store::each_gpu_memory_held;
using store::each_io_request;
using store::each_nccl_call;
using store::each_offcpu_interval;
using store::each_reclaim;
using store::each_tcp_retransmit;
using store::each_tensor_memory_held;
using store::first_event_ns;
using store::ProcessRow;
using store::processes_by_session;

// Calls and the host events a chain points at.
using store::CallRow;
using store::HostEventRow;
using store::host_events_during;
using store::slowest_call_of;
using store::slowest_calls;

// The trace itself (trace_info.h).
using store::CallStackRef;
using store::CallTable;
using store::SessionInfo;
using store::call_stack;
using store::call_table_name;
using store::family_row_counts;
using store::records_dropped;
using store::sessions;
using store::stack_frames;

}  // namespace causeway::analyze
