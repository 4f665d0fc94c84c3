// The chunks and the response both generation endpoints write, around each one's choice entries.
#include "gateway/openai/generation_stream.h"

#include "shared/error.h"

namespace flashq::gateway {

std::string dump_json(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

GenerationStream::GenerationStream(const GenerationRequest& request, std::vector<std::string> job_ids,
                                   std::int64_t created, const char* chunk_object, const char* response_object)
    : model_(request.model),
      stream_(request.stream),
      include_usage_(request.include_usage),
      created_(created),
      chunk_object_(chunk_object),
      response_object_(response_object),
      choices_(request, std::move(job_ids)) {}

nlohmann::ordered_json GenerationStream::envelope(const char* object) const {
  return {{"id", id()}, {"object", object}, {"created", created_}, {"model", model_}};
}

std::vector<std::string> GenerationStream::on_event(std::size_t choice, const protocol::Event& event) {
  GenerationChoices::Step step = choices_.on_event(choice, event);
  std::vector<std::string> out;
  if (step.failure) {
    if (stream_) out.push_back(api_error_body(*step.failure));
    return out;
  }
  if (!stream_) return out;
  for (nlohmann::ordered_json& entry : chunk_choices(choice, step)) {
    nlohmann::ordered_json chunk = envelope(chunk_object_);
    chunk["choices"] = nlohmann::ordered_json::array({std::move(entry)});
    // OpenAI: with include_usage, every chunk but the last carries usage null.
    if (include_usage_) chunk["usage"] = nullptr;
    out.push_back(dump_json(chunk));
  }
  return out;
}

std::vector<std::string> GenerationStream::finish() const {
  check_invariant(done(), "finish() comes after every choice finished");
  if (!stream_ || !include_usage_ || failure()) return {};
  nlohmann::ordered_json chunk = envelope(chunk_object_);
  chunk["choices"] = nlohmann::ordered_json::array();
  chunk["usage"] = usage_json(choices_.usage());
  return {dump_json(chunk)};
}

std::string GenerationStream::response() const {
  if (failure()) throw *failure();
  check_invariant(choices_.all_finished(), "response() comes after every choice finished");
  nlohmann::ordered_json out = envelope(response_object_);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < choices_.size(); ++i) list.push_back(response_choice(i));
  out["choices"] = list;
  out["usage"] = usage_json(choices_.usage());
  return dump_json(out);
}

}  // namespace flashq::gateway
