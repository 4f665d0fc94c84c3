// Records a model's passes (Backend::capture: CUDA graphs on a GPU) and replays them, for the
// target's forward passes and the drafter's draft passes alike.
//
// A pass's kind (Key) is everything its ops depend on besides what its input tensors hold: rows
// per sequence, each cache's address, options, and the workspace's generation (no buffer moved).
// The first pass of a kind runs directly and sizes every buffer; the next one of the same kind
// is recorded and replayed from then on (a decode batch that stays the same), up to 8 kinds, the
// oldest dropped first. A backend that cannot record a pass turns recording off, with one
// warning, and passes run directly from then on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "kernels/backend.h"
#include "shared/error.h"

namespace flashq {

template <typename Key, typename Output>
class PassRecorder {
 public:
  explicit PassRecorder(Backend& backend) : backend_(backend) {}

  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  int64_t replayed() const { return replayed_; }

  // `run_pass()` issues the pass's ops, on tensors the host filled before, and returns its output
  // (views of workspace buffers, which a replay fills again).
  template <typename RunPass>
  Output run(Key key, RunPass&& run_pass) {
    if (!enabled_) return run_pass();
    auto found = std::find_if(recorded_.begin(), recorded_.end(), [&](const Recorded& r) { return r.key == key; });
    if (found == recorded_.end() && last_direct_ == key) found = record(key, run_pass);
    if (found == recorded_.end()) {
      last_direct_ = std::move(key);
      return run_pass();
    }
    backend_.replay(*found->ops);
    ++replayed_;
    return found->out;
  }

 private:
  struct Recorded {
    Key key;
    std::unique_ptr<CapturedOps> ops;
    Output out;
  };
  static constexpr size_t kMostRecorded = 8;
  using Iterator = typename std::vector<Recorded>::iterator;

  // The recorded pass, or end() when the backend could not record it.
  template <typename RunPass>
  Iterator record(const Key& key, RunPass& run_pass) {
    Recorded pass{key, nullptr, {}};
    try {
      pass.ops = backend_.capture([&] { pass.out = run_pass(); });
    } catch (const Error& e) {
      spdlog::warn("recording passes is off: {}", e.what());
      enabled_ = false;
      return recorded_.end();
    }
    if (recorded_.size() == kMostRecorded) recorded_.erase(recorded_.begin());
    recorded_.push_back(std::move(pass));
    return recorded_.end() - 1;
  }

  Backend& backend_;
  bool enabled_ = false;
  std::optional<Key> last_direct_;
  std::vector<Recorded> recorded_;  // the most recent last
  int64_t replayed_ = 0;
};

}  // namespace flashq
