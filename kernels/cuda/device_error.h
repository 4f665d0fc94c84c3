// Errors found by kernels in data the host never sees (token ids, key counts live on the
// device). A kernel records the first one here; the backend reads it back at its next
// synchronisation point (copy_to_host) and throws there, so a bad id still fails the request
// with a typed error instead of reading out of bounds. Included by .cu and .cpp files alike.
#pragma once

#include <cstdint>

namespace flashq::cuda {

enum DeviceErrorKind : int32_t {
  kNoDeviceError = 0,
  kTokenIdOutsideTable = 1,       // embedding: value = the id, limit = rows of the table
  kKeyCountBeyondKeys = 2,        // attention: value = the count, limit = rows of k and v
  kStoreRowOutsideCache = 3,      // store_rows, store_and_attend: value = the row, limit = the cache's rows
  kGatherRowOutsideSource = 4,    // gather_rows: value = the row, limit = the source's rows
  kExpertIdOutsideRange = 5,      // moe_experts: value = the id, limit = the number of experts
  kBlockIdOutsideStore = 6,       // paged attention: value = the block id, limit = blocks in the store
  kKeyCountBeyondBlockTable = 7,  // paged attention: value = the count, limit = positions the table holds
};

struct DeviceErrorReport {
  int32_t kind;
  int32_t value;
  int64_t limit;
};

#ifdef __CUDACC__
// The first report wins; later ones are dropped (one error is enough to fail the step).
__device__ inline void report_device_error(DeviceErrorReport* report, int32_t kind, int32_t value, int64_t limit) {
  if (atomicCAS(&report->kind, static_cast<int32_t>(kNoDeviceError), kind) == kNoDeviceError) {
    report->value = value;
    report->limit = limit;
  }
}
#endif

}  // namespace flashq::cuda
