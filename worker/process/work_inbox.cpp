#include "worker/process/work_inbox.h"

namespace flashq {

void WorkInbox::push(WorkItem item) {
  {
    std::lock_guard lock(mutex_);
    items_.push_back(std::move(item));
  }
  ready_.notify_one();
}

std::vector<WorkItem> WorkInbox::take(bool wait) {
  std::unique_lock lock(mutex_);
  if (wait) ready_.wait(lock, [this] { return !items_.empty(); });
  std::vector<WorkItem> out(std::make_move_iterator(items_.begin()), std::make_move_iterator(items_.end()));
  items_.clear();
  return out;
}

}  // namespace flashq
