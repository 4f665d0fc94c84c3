#include "gateway/server/gateway.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <random>

#include "gateway/openai/generation_request.h"
#include "gateway/server/broker_answers.h"
#include "gateway/server/api_call.h"
#include "gateway/server/job_ids.h"
#include "gateway/server/routes.h"

namespace flashq::gateway {
namespace {

namespace http = boost::beast::http;
using Json = nlohmann::ordered_json;

// Constant time in the key's length, so that a wrong key's timing says nothing of a right one.
bool same_key(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::optional<std::int64_t> integer_header(const HttpRequest& request, const char* name) {
  const auto it = request.find(name);
  if (it == request.end()) return std::nullopt;
  const std::string text(it->value());
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw invalid_request(std::string("header ") + name + " must be an integer, got \"" + text + "\"", name);
}

std::optional<std::string> string_header(const HttpRequest& request, const char* name) {
  const auto it = request.find(name);
  if (it == request.end()) return std::nullopt;
  return std::string(it->value());
}

// The value of `name` in the target's query string ("a=1&b=2"), if present. Values are taken
// as sent: the ones read here (true, false, integers) need no decoding.
std::optional<std::string> query_value(const HttpRequest& request, std::string_view name) {
  const std::string_view target(request.target().data(), request.target().size());
  const std::size_t question = target.find('?');
  if (question == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// The path without its query.
std::string_view path_of(const HttpRequest& request) {
  const std::string_view target(request.target().data(), request.target().size());
  return target.substr(0, target.find('?'));
}

}  // namespace

Gateway::Gateway(GatewayOptions options) : options_(std::move(options)), started_(unix_seconds_now()) {
  std::vector<GatewayBrokerLink*> links;
  for (const BrokerEndpoints& endpoints : options_.brokers) {
    links_.push_back(std::make_unique<GatewayBrokerLink>(endpoints));
    links.push_back(links_.back().get());
  }
  watch_ = std::make_unique<ModelWatch>(std::move(links));
}

Gateway::~Gateway() { shutdown(); }

void Gateway::shutdown() {
  watch_->stop();
  links_.clear();  // their last answers reach the watch, which goes after them
}

void Gateway::wait_for_models(std::chrono::milliseconds timeout) { watch_->refresh(timeout); }

void Gateway::answer_error(const std::shared_ptr<Responder>& responder, const std::string& route,
                           const ApiError& error) {
  HttpHeaders headers;
  if (error.retry_after_s() > 0) headers.emplace_back("Retry-After", std::to_string(error.retry_after_s()));
  if (error.status() == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
  responder->respond(error.status(), "application/json", api_error_body(error), headers);
  metrics_.request_answered(route, error.status());
}

void Gateway::check_key(const HttpRequest& request) const {
  if (options_.api_keys.empty()) return;
  const auto it = request.find(http::field::authorization);
  const std::string_view value =
      it == request.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.substr(0, kBearer.size()) == kBearer) {
    const std::string_view key = value.substr(kBearer.size());
    for (const std::string& known : options_.api_keys) {
      if (same_key(key, known)) return;
    }
    throw ApiError(401, "invalid_request_error", "invalid_api_key", "the API key given is not valid");
  }
  throw ApiError(401, "invalid_request_error", "missing_api_key",
                 "an API key is required: send it as the header \"Authorization: Bearer <key>\"");
}

void Gateway::handle(const HttpRequest& request, std::shared_ptr<Responder> responder) {
  const std::string path(path_of(request));
  const RouteMatch match = match_route(path);
  try {
    route(request, responder, path, match);
  } catch (const ApiError& error) {
    answer_error(responder, route_label(match.counted_as), error);
  } catch (const std::exception& e) {
    spdlog::error("gateway: {} {} failed: {}", std::string(request.method_string()), path, e.what());
    answer_error(responder, route_label(match.counted_as), ApiError(500, "server_error", "internal", "internal error"));
  }
}

void Gateway::route(const HttpRequest& request, const std::shared_ptr<Responder>& responder, const std::string& path,
                    const RouteMatch& match) {
  const bool unknown = match.route == Route::kUnknown ||
                       ((match.route == Route::kResponse || match.route == Route::kResponseCancel) &&
                        match.response_id.empty());
  // Operations pages ask no key, as a load balancer or a scraper asks them.
  if (!is_operations_route(match.route)) check_key(request);
  if (unknown) {
    throw ApiError(404, "invalid_request_error", "unknown_url", "no endpoint " + path + " (docs/gateway.md lists them)");
  }
  const char* method = route_method(match.route);
  if (request.method_string() != method) {
    throw ApiError(405, "invalid_request_error", "method_not_allowed",
                   std::string(request.method_string()) + " is not allowed on " + path + " (use " + method + ")");
  }
  switch (match.route) {
    case Route::kHealthz:
      responder->respond(200, "text/plain", "ok\n");
      return;
    case Route::kReadyz: {
      const bool ready = watch_->ready();
      responder->respond(ready ? 200 : 503, "text/plain", ready ? "ready\n" : "no broker with a worker yet\n");
      return;
    }
    case Route::kMetrics:
      responder->respond(200, "text/plain; version=0.0.4", metrics_.render(server_ ? server_->open_connections() : 0));
      return;
    case Route::kModels:
      if (!watch_->reachable()) {
        throw ApiError(503, "server_error", "unavailable", "no broker is reachable from the gateway", std::nullopt, 1);
      }
      list_models(responder);
      return;
    case Route::kChatCompletions:
    case Route::kCompletions:
      generate(request, responder, match.route);
      return;
    case Route::kResponses:
      create_response(request, responder);
      return;
    case Route::kResponse:
    case Route::kResponseCancel:
      follow_response(request, responder, match.response_id, match.route == Route::kResponseCancel);
      return;
    case Route::kUnknown:
      return;
  }
}

void Gateway::list_models(const std::shared_ptr<Responder>& responder) {
  Json data = Json::array();
  for (const auto& [name, model] : *watch_->directory()) {
    Json entry = {{"id", name}, {"object", "model"}, {"created", started_}, {"owned_by", "flashq"}};
    if (model.max_model_len > 0) entry["max_model_len"] = model.max_model_len;
    data.push_back(entry);
  }
  responder->respond(200, "application/json", Json{{"object", "list"}, {"data", data}}.dump());
  metrics_.request_answered(route_label(Route::kModels), 200);
}

void Gateway::generate(const HttpRequest& request, const std::shared_ptr<Responder>& responder, Route route) {
  // Ordered: tool definitions reach the chat template key by key, as the client wrote them.
  const nlohmann::ordered_json body =
      nlohmann::ordered_json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw invalid_request("the body is not valid JSON", std::nullopt, "invalid_json");
  RequestExtensions ext;
  ext.priority = integer_header(request, "x-flashq-priority");
  ext.deadline_ms = integer_header(request, "x-flashq-deadline-ms");
  ext.session = string_header(request, "x-flashq-session");
  ext.default_max_tokens = options_.default_max_tokens;
  ext.default_seed = std::random_device{}();
  if (!watch_->reachable()) {
    // No broker has answered lately: nothing can be served or refused with certainty now.
    throw ApiError(503, "server_error", "unavailable", "no broker is reachable from the gateway", std::nullopt, 1);
  }
  const auto models = watch_->directory();
  GenerationRequest generation = route == Route::kChatCompletions ? read_chat_completion_request(body, *models, ext)
                                                                 : read_completion_request(body, *models, ext);
  GatewayBrokerLink& link = watch_->link_for(generation.model);
  const std::string prefix = route == Route::kChatCompletions ? "chatcmpl-" : "cmpl-";
  std::vector<std::string> ids;
  for (protocol::Job& job : generation.jobs) {
    job.id = new_job_id(prefix);
    ids.push_back(job.id);
  }
  std::unique_ptr<CallRenderer> renderer = generation_renderer(generation, std::move(ids), unix_seconds_now());
  const CallOptions options{.route = route_label(route),
                            .stream = generation.stream,
                            .measure_tokens = true,
                            .name_jobs_in_errors = true};
  ApiCall::submit(std::move(generation.jobs), std::move(renderer), options, link, metrics_, responder);
}

void Gateway::create_response(const HttpRequest& request, const std::shared_ptr<Responder>& responder) {
  const ResponsesJson body = ResponsesJson::parse(request.body(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw invalid_request("the body is not valid JSON", std::nullopt, "invalid_json");
  if (!watch_->reachable()) {
    throw ApiError(503, "server_error", "unavailable", "no broker is reachable from the gateway", std::nullopt, 1);
  }
  ResponsesJobOptions options;
  options.priority = integer_header(request, "x-flashq-priority").value_or(0);
  options.deadline_ms = integer_header(request, "x-flashq-deadline-ms").value_or(0);
  options.session = string_header(request, "x-flashq-session");
  options.created_at = unix_seconds_now();
  ResponsesRequest response = read_responses_request(body, *watch_->directory(), options);
  response.job.id = new_job_id("resp_");
  GatewayBrokerLink& link = watch_->link_for(response.model);
  // Only a response created without background belongs to its connection.
  const CallOptions call_options{.route = route_label(Route::kResponses),
                                 .stream = response.stream,
                                 .owns_jobs = !response.background,
                                 .answer_when_accepted = response.background && !response.stream};
  std::unique_ptr<CallRenderer> renderer = response_renderer(response);
  std::vector<protocol::Job> jobs;
  jobs.push_back(std::move(response.job));
  ApiCall::submit(std::move(jobs), std::move(renderer), call_options, link, metrics_, responder);
}

void Gateway::follow_response(const HttpRequest& request, const std::shared_ptr<Responder>& responder,
                              const std::string& id, bool cancel) {
  bool stream_it = false;
  std::int64_t starting_after = -1;
  if (!cancel) {
    const std::optional<std::string> stream = query_value(request, "stream");
    if (stream && *stream != "true" && *stream != "false") {
      throw invalid_request("stream must be true or false, got \"" + *stream + "\"", "stream");
    }
    stream_it = stream == "true";
    if (const std::optional<std::string> after = query_value(request, "starting_after")) {
      try {
        std::size_t used = 0;
        starting_after = std::stoll(*after, &used);
        if (used != after->size() || starting_after < 0) throw std::invalid_argument("not a count");
      } catch (const std::exception&) {
        throw invalid_request("starting_after must be a sequence number (an integer >= 0)", "starting_after");
      }
    }
  }
  const std::string& route = route_label(cancel ? Route::kResponseCancel : Route::kResponse);
  find_response(id, 0, responder, route,
                [this, cancel, stream_it, starting_after, responder, route](
                    const ResponsesRequest& found, const protocol::StatusReply& status, GatewayBrokerLink& link) {
                  // A follower never owns the job: a client that leaves only stops following.
                  ResponseView view{.known_final = status.final_result};
                  if (stream_it) {
                    view.starting_after = starting_after;
                  } else if (!cancel) {
                    view.answer_at_job_seq = status.seq;  // the response as it stood when asked
                  }
                  const CallOptions options{.route = route, .stream = stream_it, .owns_jobs = false};
                  ApiCall::follow(found.job.id, cancel, response_renderer(found, std::move(view)), options, link,
                                  metrics_, responder);
                });
}

void Gateway::find_response(const std::string& id, std::size_t link, std::shared_ptr<Responder> responder,
                            const std::string& route, ResponseFound found) {
  if (link >= links_.size()) {
    answer_error(responder, route, ApiError(404, "invalid_request_error", "not_found", "no response '" + id + "'"));
    return;
  }
  links_[link]->status(id, [this, id, link, responder, route, found](const StatusOutcome& outcome) {
    try {
      if (const auto* error = std::get_if<protocol::ErrorReply>(&outcome)) {
        if (error->code != "unavailable" || link + 1 >= links_.size()) throw broker_error(*error);
        find_response(id, link + 1, responder, route, found);
        return;
      }
      const auto& status = std::get<protocol::StatusReply>(outcome);
      if (status.state == protocol::JobState::kUnknown) {
        find_response(id, link + 1, responder, route, found);
        return;
      }
      protocol::Job job;
      job.id = id;
      job.metadata = status.metadata;
      found(recover_responses_request(job), status, *links_[link]);
    } catch (const ApiError& error) {
      answer_error(responder, route, error);
    }
  });
}

}  // namespace flashq::gateway
