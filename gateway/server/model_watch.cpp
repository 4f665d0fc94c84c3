#include "gateway/server/model_watch.h"

#include <spdlog/spdlog.h>

namespace flashq::gateway {
namespace {

ServedModel served_model_of(const protocol::ModelInfo& info) {
  ServedModel model;
  model.name = info.name;
  model.max_model_len = info.max_model_len;
  model.output_format.tool_calls = info.tool_call_format;
  // think_in_prompt parses as think; whether the output starts inside it is the request's.
  model.output_format.reasoning = info.reasoning_format == protocol::ReasoningFormat::kThinkInPrompt
                                      ? protocol::ReasoningFormat::kThinkTags
                                      : info.reasoning_format;
  model.reasoning_opens_in_prompt = info.reasoning_format == protocol::ReasoningFormat::kThinkInPrompt;
  return model;
}

}  // namespace

ModelWatch::ModelWatch(std::vector<GatewayBrokerLink*> links, std::chrono::milliseconds interval)
    : links_(std::move(links)),
      interval_(interval),
      per_link_(links_.size()),
      answered_at_(links_.size()),
      merged_(std::make_shared<ModelDirectory>()) {
  thread_ = std::thread([this] { loop(); });
}

ModelWatch::~ModelWatch() { stop(); }

void ModelWatch::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const ModelDirectory> ModelWatch::directory() const {
  std::lock_guard lock(mutex_);
  return merged_;
}

GatewayBrokerLink& ModelWatch::link_for(const std::string& model) {
  std::lock_guard lock(mutex_);
  for (std::size_t tried = 0; tried < links_.size(); ++tried) {
    const std::size_t i = next_link_++ % links_.size();
    if (per_link_[i].count(model)) return *links_[i];
  }
  return *links_.front();
}

bool ModelWatch::answered_recently(std::size_t link, std::chrono::steady_clock::time_point now) const {
  return answered_at_[link] != std::chrono::steady_clock::time_point() &&
         now - answered_at_[link] < 3 * interval_ + std::chrono::seconds(5);
}

bool ModelWatch::reachable() const {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < links_.size(); ++i) {
    if (answered_recently(i, now)) return true;
  }
  return false;
}

bool ModelWatch::ready() const {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < links_.size(); ++i) {
    if (!per_link_[i].empty() && answered_recently(i, now)) return true;
  }
  return false;
}

void ModelWatch::ask_all() {
  for (std::size_t i = 0; i < links_.size(); ++i) {
    links_[i]->models([this, i](const ModelsOutcome& outcome) {
      std::lock_guard lock(mutex_);
      if (const auto* reply = std::get_if<protocol::ModelsReply>(&outcome)) {
        ModelDirectory served;
        for (const protocol::ModelInfo& info : reply->models) served[info.name] = served_model_of(info);
        per_link_[i] = std::move(served);
        answered_at_[i] = std::chrono::steady_clock::now();
      } else {
        per_link_[i].clear();
        // Never answered yet (its connection is still being made, at start): ask again soon
        // rather than a whole interval later.
        if (answered_at_[i] == std::chrono::steady_clock::time_point()) retry_soon_ = true;
      }
      // Merged in link order: the first broker's view of a model wins, except that a context
      // length is the smallest any of them reports.
      auto merged = std::make_shared<ModelDirectory>();
      for (const ModelDirectory& served : per_link_) {
        for (const auto& [name, model] : served) {
          auto [it, inserted] = merged->emplace(name, model);
          if (!inserted && model.max_model_len > 0 &&
              (it->second.max_model_len == 0 || model.max_model_len < it->second.max_model_len)) {
            it->second.max_model_len = model.max_model_len;
          }
        }
      }
      merged_ = std::move(merged);
      ++answers_;
      changed_.notify_all();
    });
  }
}

void ModelWatch::refresh(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = answers_ + links_.size();
  lock.unlock();
  ask_all();
  lock.lock();
  changed_.wait_for(lock, timeout, [&] { return answers_ >= target || stopping_; });
}

void ModelWatch::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    retry_soon_ = false;
    lock.unlock();
    ask_all();
    lock.lock();
    constexpr auto kSoon = std::chrono::milliseconds(100);
    changed_.wait_for(lock, kSoon, [&] { return stopping_; });
    if (!retry_soon_) changed_.wait_for(lock, interval_ - kSoon, [&] { return stopping_; });
  }
}

}  // namespace flashq::gateway
