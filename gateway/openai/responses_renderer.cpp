// Job events rendered as the Responses API's stream events and response object.
#include "gateway/openai/responses_renderer.h"

#include "gateway/openai/logprobs_json.h"
#include "shared/error.h"

namespace flashq::gateway {

namespace {

std::string dump(const ResponsesJson& value) {
  // Generated text may stop inside a UTF-8 character; the parsers hold such bytes back, and
  // anything still invalid is replaced rather than failing the stream.
  return value.dump(-1, ' ', false, ResponsesJson::error_handler_t::replace);
}

const char* item_prefix(int kind) {
  static const char* const kPrefixes[] = {"rs_", "msg_", "fc_"};
  return kPrefixes[kind];
}

}  // namespace

ResponsesRenderer::ResponsesRenderer(ResponseSettings settings, std::string response_id, std::int64_t created_at)
    : settings_(std::move(settings)), response_id_(std::move(response_id)), created_at_(created_at) {
  OutputParserOptions options;
  options.parse_tool_calls = settings_.parse_tool_calls;
  options.starts_in_reasoning = settings_.starts_in_reasoning;
  // A call is sent once its JSON is complete and valid, so every function_call item's arguments
  // are valid JSON; malformed calls stay text.
  options.argument_streaming = ArgumentStreaming::kValidated;
  const std::string call_prefix = "call_" + response_id_ + "_";
  options.make_tool_call_id = [call_prefix](int index) { return call_prefix + std::to_string(index); };
  parser_ = make_output_parser(settings_.output_format, options);
  status_ = settings_.echo.value("background", false) ? "queued" : "in_progress";
}

ResponsesRenderer::ResponsesRenderer(const ResponsesRequest& request)
    : ResponsesRenderer(request.settings, request.job.id, request.created_at) {
  check_invariant(!request.job.id.empty(), "a response's job has its id before it is rendered");
}

ResponsesRenderer::~ResponsesRenderer() = default;

void ResponsesRenderer::emit(Events& out, std::string type, ResponsesJson fields) {
  ResponsesJson event = {{"type", type}, {"sequence_number", next_sequence_}};
  for (auto& [key, value] : fields.items()) event[key] = std::move(value);
  out.push_back({next_sequence_, std::move(type), dump(event)});
  ++next_sequence_;
}

void ResponsesRenderer::emit_lifecycle(Events& out, const std::string& type) {
  emit(out, type, {{"response", response_object()}});
}

std::vector<StreamedEvent> ResponsesRenderer::begin() {
  check_invariant(!began_, "ResponsesRenderer::begin is called once");
  began_ = true;
  Events out;
  emit_lifecycle(out, "response.created");
  emit_lifecycle(out, status_ == "queued" ? "response.queued" : "response.in_progress");
  return out;
}

std::vector<StreamedEvent> ResponsesRenderer::on_event(const protocol::Event& event) {
  check_invariant(began_, "ResponsesRenderer::begin comes before the job's events");
  Events out;
  if (finished_ || event.seq < next_job_seq_) return out;
  if (event.seq > next_job_seq_) {
    throw Error(ErrorCode::kInvalidArgument, "response " + response_id_ + ": job event " + std::to_string(event.seq) +
                                                 " came before event " + std::to_string(next_job_seq_));
  }
  ++next_job_seq_;
  if (status_ == "queued") {
    status_ = "in_progress";
    emit_lifecycle(out, "response.in_progress");
  }
  pending_logprobs_.insert(pending_logprobs_.end(), event.logprobs.begin(), event.logprobs.end());
  if (!event.text.empty()) apply(out, parser_->feed(event.text));
  if (event.final_result) finish(out, *event.final_result);
  return out;
}

std::vector<StreamedEvent> ResponsesRenderer::on_final(const protocol::FinalResult& final_result) {
  check_invariant(began_, "ResponsesRenderer::begin comes before the job's end");
  Events out;
  if (finished_) return out;
  if (status_ == "queued") {
    status_ = "in_progress";
    emit_lifecycle(out, "response.in_progress");
  }
  finish(out, final_result);
  return out;
}

StreamedEvent ResponsesRenderer::error_event(std::string_view code, std::string_view message) {
  Events out;
  emit(out, "error", {{"code", code}, {"message", message}, {"param", nullptr}});
  return out.front();
}

ResponsesJson ResponsesRenderer::part_json(const Item& item) const {
  if (item.kind == ItemKind::kReasoning) return {{"type", "reasoning_text"}, {"text", item.text}};
  return {{"type", "output_text"}, {"annotations", ResponsesJson::array()},
          {"logprobs", token_logprobs_json(item.logprobs)}, {"text", item.text}};
}

ResponsesJson ResponsesRenderer::item_json(const Item& item, bool as_added) const {
  // In response.output_item.added an item is empty: its part and text follow as events of their
  // own (a client appends them). Elsewhere it holds what has been generated so far.
  const bool done = !as_added;
  switch (item.kind) {
    case ItemKind::kReasoning:
      return {{"id", item.id},
              {"type", "reasoning"},
              {"status", item.status},
              {"summary", ResponsesJson::array()},
              {"content", done ? ResponsesJson::array({part_json(item)}) : ResponsesJson::array()}};
    case ItemKind::kMessage:
      return {{"id", item.id},
              {"type", "message"},
              {"status", item.status},
              {"role", "assistant"},
              {"content", done ? ResponsesJson::array({part_json(item)}) : ResponsesJson::array()}};
    case ItemKind::kFunctionCall:
      return {{"id", item.id},          {"type", "function_call"}, {"status", item.status},
              {"call_id", item.call_id}, {"name", item.name},      {"arguments", done ? item.text : ""}};
  }
  return {};
}

ResponsesRenderer::Item& ResponsesRenderer::open_item(Events& out, ItemKind kind) {
  if (open_ >= 0 && items_[static_cast<std::size_t>(open_)].kind == kind && kind != ItemKind::kFunctionCall) {
    return items_[static_cast<std::size_t>(open_)];
  }
  close_item(out, "completed");
  const std::size_t index = items_.size();
  items_.push_back({kind, item_prefix(static_cast<int>(kind)) + response_id_ + "_" + std::to_string(index), "", "", "",
                    "in_progress"});
  open_ = static_cast<int>(index);
  return items_.back();
}

void ResponsesRenderer::close_item(Events& out, const std::string& status) {
  if (open_ < 0) return;
  const std::size_t index = static_cast<std::size_t>(open_);
  open_ = -1;
  Item& item = items_[index];
  item.status = status;
  const ResponsesJson where = {{"item_id", item.id}, {"output_index", index}};
  auto with = [&](ResponsesJson fields) {
    ResponsesJson all = where;
    for (auto& [key, value] : fields.items()) all[key] = std::move(value);
    return all;
  };
  switch (item.kind) {
    case ItemKind::kReasoning:
      emit(out, "response.reasoning_text.done", with({{"content_index", 0}, {"text", item.text}}));
      emit(out, "response.content_part.done", with({{"content_index", 0}, {"part", part_json(item)}}));
      break;
    case ItemKind::kMessage:
      emit(out, "response.output_text.done",
           with({{"content_index", 0}, {"text", item.text}, {"logprobs", token_logprobs_json(item.logprobs)}}));
      emit(out, "response.content_part.done", with({{"content_index", 0}, {"part", part_json(item)}}));
      break;
    case ItemKind::kFunctionCall:
      // Only a complete call (kToolCallEnd) is done with its arguments; one cut short keeps what
      // it had.
      if (status == "completed") {
        emit(out, "response.function_call_arguments.done", with({{"name", item.name}, {"arguments", item.text}}));
      }
      break;
  }
  emit(out, "response.output_item.done", {{"output_index", index}, {"item", item_json(item)}});
}

void ResponsesRenderer::apply(Events& out, const OutputDeltas& deltas) {
  message_.apply(deltas);
  for (const OutputDelta& delta : deltas) {
    switch (delta.kind) {
      case DeltaKind::kContent:
      case DeltaKind::kReasoning: {
        if (delta.text.empty()) break;
        const bool reasoning = delta.kind == DeltaKind::kReasoning;
        const bool opening = open_ < 0 || items_[static_cast<std::size_t>(open_)].kind !=
                                              (reasoning ? ItemKind::kReasoning : ItemKind::kMessage);
        Item& item = open_item(out, reasoning ? ItemKind::kReasoning : ItemKind::kMessage);
        const std::size_t index = static_cast<std::size_t>(open_);
        if (opening) {
          emit(out, "response.output_item.added", {{"output_index", index}, {"item", item_json(item, true)}});
          emit(out, "response.content_part.added",
               {{"item_id", item.id}, {"output_index", index}, {"content_index", 0}, {"part", part_json(item)}});
        }
        item.text += delta.text;
        ResponsesJson fields = {{"item_id", item.id}, {"output_index", index}, {"content_index", 0}, {"delta", delta.text}};
        if (!reasoning) {
          fields["logprobs"] = token_logprobs_json(pending_logprobs_);
          item.logprobs.insert(item.logprobs.end(), pending_logprobs_.begin(), pending_logprobs_.end());
        }
        pending_logprobs_.clear();
        emit(out, reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", std::move(fields));
        break;
      }
      case DeltaKind::kToolCallStart: {
        pending_logprobs_.clear();
        Item& item = open_item(out, ItemKind::kFunctionCall);
        item.call_id = delta.id;
        item.name = delta.name;
        emit(out, "response.output_item.added", {{"output_index", open_}, {"item", item_json(item, true)}});
        break;
      }
      case DeltaKind::kToolCallArguments: {
        check_invariant(open_ >= 0 && items_[static_cast<std::size_t>(open_)].kind == ItemKind::kFunctionCall,
                        "tool call arguments follow their start");
        Item& item = items_[static_cast<std::size_t>(open_)];
        item.text += delta.text;
        pending_logprobs_.clear();
        emit(out, "response.function_call_arguments.delta",
             {{"item_id", item.id}, {"output_index", open_}, {"delta", delta.text}});
        break;
      }
      case DeltaKind::kToolCallEnd:
        close_item(out, "completed");
        break;
    }
  }
}

void ResponsesRenderer::finish(Events& out, const protocol::FinalResult& final_result) {
  apply(out, parser_->finish());
  using protocol::FinishReason;
  const FinishReason reason = final_result.finish_reason;
  close_item(out, reason == FinishReason::kStop ? "completed" : "incomplete");
  finished_ = true;
  const std::int64_t input = final_result.usage.prompt_tokens;
  const std::int64_t output = final_result.usage.completion_tokens;
  usage_ = {{"input_tokens", input},
            {"input_tokens_details", {{"cached_tokens", 0}}},
            {"output_tokens", output},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", input + output}};
  auto fail = [&](const char* code, const std::string& message) {
    status_ = "failed";
    error_ = {{"code", code}, {"message", message}};
    emit_lifecycle(out, "response.failed");
  };
  switch (reason) {
    case FinishReason::kStop: {
      const ToolChoiceVerdict verdict = judge_tool_choice(settings_.tool_choice, message_, GenerationEnd::kStop);
      if (verdict.violated) {
        fail("tool_choice_not_met", verdict.violation);
        return;
      }
      status_ = "completed";
      emit_lifecycle(out, "response.completed");
      return;
    }
    case FinishReason::kLength:
      status_ = "incomplete";
      incomplete_details_ = {{"reason", "max_output_tokens"}};
      emit_lifecycle(out, "response.incomplete");
      return;
    case FinishReason::kCancelled:
      status_ = "cancelled";
      emit_lifecycle(out, "response.incomplete");
      return;
    case FinishReason::kDeadline:
      fail("deadline_exceeded", final_result.error.value_or("the job's deadline passed before it finished"));
      return;
    case FinishReason::kRejected:
      fail("invalid_prompt", final_result.error.value_or("the worker refused the job"));
      return;
    case FinishReason::kError:
      fail("server_error", final_result.error.value_or("the job failed"));
      return;
  }
}

ResponsesJson ResponsesRenderer::response_object() const {
  ResponsesJson response = {{"id", response_id_}, {"object", "response"}, {"created_at", created_at_},
                            {"status", status_}};
  response["background"] = settings_.echo.at("background");
  response["error"] = error_;
  response["incomplete_details"] = incomplete_details_;
  for (const char* key : {"instructions", "max_output_tokens", "model"}) response[key] = settings_.echo.at(key);
  ResponsesJson output = ResponsesJson::array();
  for (const Item& item : items_) output.push_back(item_json(item));
  response["output"] = std::move(output);
  for (const char* key : {"parallel_tool_calls"}) response[key] = settings_.echo.at(key);
  response["previous_response_id"] = nullptr;
  for (const char* key : {"reasoning", "store", "temperature", "text", "tool_choice", "tools", "top_p", "truncation"}) {
    response[key] = settings_.echo.at(key);
  }
  response["usage"] = usage_;
  for (const char* key : {"top_logprobs", "user", "safety_identifier"}) {
    if (settings_.echo.contains(key)) response[key] = settings_.echo.at(key);
  }
  response["metadata"] = settings_.echo.at("metadata");
  return response;
}

}  // namespace flashq::gateway
