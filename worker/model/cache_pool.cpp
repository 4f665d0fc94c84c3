#include "worker/model/cache_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "shared/error.h"

namespace flashq {
namespace {

std::string mib(int64_t bytes) {
  return std::to_string(static_cast<int64_t>(std::llround(static_cast<double>(bytes) / (1 << 20)))) + " MiB";
}

// Host memory for the pool, mapped and never touched here: anonymous pages read as zero and are
// committed one by one as caches first write them (the runs' contents are unspecified anyway).
Tensor map_host_memory(int64_t bytes) {
  void* memory = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) {
    throw Error(ErrorCode::kIo, "cannot map a KV cache pool of " + mib(bytes) + ": " + std::strerror(errno) +
                                    " (a smaller --cache-memory-mb or --cpu-memory-fraction needs less)");
  }
  std::shared_ptr<void> owner(memory, [bytes](void* p) { ::munmap(p, static_cast<size_t>(bytes)); });
  return Tensor(std::move(owner), memory, DType::kF32, Device::kCpu, {bytes / static_cast<int64_t>(sizeof(float))});
}

}  // namespace

// The pool's memory and free list, kept alive by every run handed out.
struct CachePool::State {
  Tensor memory;  // float32 elements: the pool deals in bytes, aligned far beyond an element
  int64_t capacity = 0;
  std::mutex mutex;                      // runs may be released from any thread that drops the last view
  std::map<int64_t, int64_t> free_runs;  // offset -> length, in address order

  void release(int64_t offset, int64_t length) {
    std::lock_guard lock(mutex);
    auto next = free_runs.lower_bound(offset);
    if (next != free_runs.end() && offset + length == next->first) {  // merge with the run after
      length += next->second;
      next = free_runs.erase(next);
    }
    if (next != free_runs.begin()) {
      auto before = std::prev(next);
      if (before->first + before->second == offset) {  // and with the run before
        before->second += length;
        return;
      }
    }
    free_runs.emplace(offset, length);
  }
};

CachePool::CachePool(Backend& backend, int64_t bytes) : state_(std::make_shared<State>()) {
  if (bytes <= 0) throw Error(ErrorCode::kInvalidArgument, "the cache pool needs a positive size");
  state_->capacity = bytes / kAlignment * kAlignment;
  if (state_->capacity == 0) throw Error(ErrorCode::kInvalidArgument, "the cache pool is smaller than one run");
  state_->memory = backend.device() == Device::kCpu
                       ? map_host_memory(state_->capacity)
                       : backend.allocate(DType::kF32, {state_->capacity / static_cast<int64_t>(sizeof(float))});
  state_->free_runs.emplace(0, state_->capacity);
}

CachePool::~CachePool() = default;

int64_t CachePool::footprint(int64_t bytes) {
  return std::max<int64_t>(1, (bytes + kAlignment - 1) / kAlignment) * kAlignment;
}

int64_t CachePool::capacity_bytes() const { return state_->capacity; }

int64_t CachePool::free_bytes() const {
  std::lock_guard lock(state_->mutex);
  int64_t total = 0;
  for (const auto& [offset, length] : state_->free_runs) total += length;
  return total;
}

int64_t CachePool::largest_free_bytes() const {
  std::lock_guard lock(state_->mutex);
  int64_t largest = 0;
  for (const auto& [offset, length] : state_->free_runs) largest = std::max(largest, length);
  return largest;
}

std::optional<Tensor> CachePool::try_allocate(DType dtype, Shape shape) {
  const Tensor probe(nullptr, nullptr, dtype, state_->memory.device(), shape);
  const int64_t length = footprint(static_cast<int64_t>(probe.nbytes()));
  int64_t offset = -1;
  {
    std::lock_guard lock(state_->mutex);
    for (auto it = state_->free_runs.begin(); it != state_->free_runs.end(); ++it) {
      if (it->second < length) continue;
      offset = it->first;
      const int64_t left = it->second - length;
      state_->free_runs.erase(it);
      if (left > 0) state_->free_runs.emplace(offset + length, left);
      break;
    }
  }
  if (offset < 0) return std::nullopt;
  std::shared_ptr<State> state = state_;
  std::shared_ptr<void> run(static_cast<char*>(state->memory.raw()) + offset,
                            [state, offset, length](void*) { state->release(offset, length); });
  void* data = run.get();
  return Tensor(std::move(run), data, dtype, state_->memory.device(), std::move(shape));
}

int64_t cache_pool_bytes(double fraction, int64_t total_bytes, int64_t free_bytes) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw Error(ErrorCode::kInvalidArgument,
                "--gpu-memory-fraction must be in (0, 1], got " + std::to_string(fraction));
  }
  const int64_t in_use = total_bytes - free_bytes;  // weights, workspace, the runtime's own
  const auto allowed = static_cast<int64_t>(fraction * static_cast<double>(total_bytes));
  const int64_t left = allowed - in_use;
  if (left < CachePool::kAlignment) {
    throw Error(ErrorCode::kInvalidArgument,
                "the model does not fit: " + mib(in_use) + " of the device's " + mib(total_bytes) +
                    " are in use after loading it, and --gpu-memory-fraction " + std::to_string(fraction) + " allows " +
                    mib(allowed) + ", which leaves nothing for KV caches");
  }
  return left;
}

int64_t host_cache_pool_bytes(double fraction, int64_t available_bytes, int64_t weight_bytes, int64_t useful_bytes) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw Error(ErrorCode::kInvalidArgument,
                "--cpu-memory-fraction must be in (0, 1], got " + std::to_string(fraction));
  }
  const int64_t spare = std::max<int64_t>(0, available_bytes - weight_bytes);
  const auto share = static_cast<int64_t>(fraction * static_cast<double>(spare));
  const int64_t bytes = std::min({share, useful_bytes, kHostCachePoolMaxBytes});
  return bytes < std::min(kHostCachePoolMinBytes, useful_bytes) || bytes < CachePool::kAlignment ? 0 : bytes;
}

}  // namespace flashq
