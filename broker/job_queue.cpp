#include "broker/job_queue.h"

#include <algorithm>

namespace flashq {

int64_t estimate_prompt_tokens(const protocol::Job& job) {
  if (const auto* text = std::get_if<std::string>(&job.prompt)) return static_cast<int64_t>(text->size()) / 4 + 1;
  if (const auto* ids = std::get_if<protocol::TokenIds>(&job.prompt)) return static_cast<int64_t>(ids->size());
  // A chat's prompt holds its text and the tool definitions the template writes into it.
  int64_t bytes = job.tools ? static_cast<int64_t>(job.tools->size()) : 0;
  for (const auto& m : std::get<std::vector<protocol::ChatMessage>>(job.prompt)) {
    if (m.content) bytes += static_cast<int64_t>(m.content->size());
    if (m.reasoning_content) bytes += static_cast<int64_t>(m.reasoning_content->size());
    for (const protocol::ToolCall& call : m.tool_calls) bytes += static_cast<int64_t>(call.arguments_json.size());
  }
  return bytes / 4 + 1;
}

bool JobQueue::push_back(const std::string& job_id, int64_t priority, int64_t prompt_tokens) {
  if (jobs_ + 1 > limits_.max_jobs || prompt_tokens_ + prompt_tokens > limits_.max_prompt_tokens) return false;
  levels_[priority].push_back(job_id);
  entries_[job_id] = {priority, prompt_tokens};
  ++jobs_;
  prompt_tokens_ += prompt_tokens;
  return true;
}

void JobQueue::push_front(const std::string& job_id, int64_t priority, int64_t prompt_tokens) {
  levels_[priority].push_front(job_id);
  entries_[job_id] = {priority, prompt_tokens};
  ++jobs_;
  prompt_tokens_ += prompt_tokens;
}

std::optional<std::string> JobQueue::pop() {
  if (levels_.empty()) return std::nullopt;
  auto level = levels_.begin();
  std::string id = std::move(level->second.front());
  level->second.pop_front();
  if (level->second.empty()) levels_.erase(level);
  auto entry = entries_.find(id);
  prompt_tokens_ -= entry->second.prompt_tokens;
  entries_.erase(entry);
  --jobs_;
  return id;
}

bool JobQueue::remove(const std::string& job_id) {
  auto entry = entries_.find(job_id);
  if (entry == entries_.end()) return false;
  auto level = levels_.find(entry->second.priority);
  auto& ids = level->second;
  ids.erase(std::find(ids.begin(), ids.end(), job_id));
  if (ids.empty()) levels_.erase(level);
  prompt_tokens_ -= entry->second.prompt_tokens;
  entries_.erase(entry);
  --jobs_;
  return true;
}

int64_t JobQueue::size_at(int64_t priority) const {
  auto level = levels_.find(priority);
  return level == levels_.end() ? 0 : static_cast<int64_t>(level->second.size());
}

}  // namespace flashq
