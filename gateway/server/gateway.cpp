#include "gateway/server/gateway.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <random>

#include "gateway/openai/generation_request.h"
#include "gateway/server/generation_call.h"
#include "gateway/server/job_ids.h"

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

// The path without its query.
std::string_view path_of(const HttpRequest& request) {
  const std::string_view target(request.target().data(), request.target().size());
  return target.substr(0, target.find('?'));
}

}  // namespace

Gateway::Gateway(GatewayOptions options) : options_(std::move(options)), started_(unix_seconds_now()) {
  std::vector<BrokerLink*> links;
  for (const BrokerEndpoints& endpoints : options_.brokers) {
    links_.push_back(std::make_unique<BrokerLink>(endpoints));
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
  const std::string_view value = it == request.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
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
  try {
    route(request, responder, path);
  } catch (const ApiError& error) {
    answer_error(responder, path, error);
  } catch (const std::exception& e) {
    spdlog::error("gateway: {} {} failed: {}", std::string(request.method_string()), path, e.what());
    answer_error(responder, path, ApiError(500, "server_error", "internal", "internal error"));
  }
}

void Gateway::route(const HttpRequest& request, const std::shared_ptr<Responder>& responder, const std::string& path) {
  const bool get = request.method() == http::verb::get;
  const bool post = request.method() == http::verb::post;
  auto wrong_method = [&](const char* allowed) {
    return ApiError(405, "invalid_request_error", "method_not_allowed",
                    std::string(request.method_string()) + " is not allowed on " + path + " (use " + allowed + ")");
  };
  // Operations pages: no key, as a load balancer or a scraper asks them.
  if (path == "/healthz") {
    if (!get) throw wrong_method("GET");
    responder->respond(200, "text/plain", "ok\n");
    return;
  }
  if (path == "/readyz") {
    if (!get) throw wrong_method("GET");
    const bool ready = watch_->ready();
    responder->respond(ready ? 200 : 503, "text/plain", ready ? "ready\n" : "no broker with a worker yet\n");
    return;
  }
  if (path == "/metrics") {
    if (!get) throw wrong_method("GET");
    responder->respond(200, "text/plain; version=0.0.4", metrics_.render(server_ ? server_->open_connections() : 0));
    return;
  }
  check_key(request);
  if (path == "/v1/models") {
    if (!get) throw wrong_method("GET");
    if (!watch_->reachable()) {
      throw ApiError(503, "server_error", "unavailable", "no broker is reachable from the gateway", std::nullopt, 1);
    }
    list_models(responder, path);
    return;
  }
  if (path == "/v1/chat/completions" || path == "/v1/completions") {
    if (!post) throw wrong_method("POST");
    generate(request, responder, path);
    return;
  }
  throw ApiError(404, "invalid_request_error", "unknown_url", "no endpoint " + path + " (docs/gateway.md lists them)");
}

void Gateway::list_models(const std::shared_ptr<Responder>& responder, const std::string& route) {
  Json data = Json::array();
  for (const auto& [name, model] : *watch_->directory()) {
    Json entry = {{"id", name}, {"object", "model"}, {"created", started_}, {"owned_by", "flashq"}};
    if (model.max_model_len > 0) entry["max_model_len"] = model.max_model_len;
    data.push_back(entry);
  }
  responder->respond(200, "application/json", Json{{"object", "list"}, {"data", data}}.dump());
  metrics_.request_answered(route, 200);
}

void Gateway::generate(const HttpRequest& request, const std::shared_ptr<Responder>& responder,
                       const std::string& route) {
  const nlohmann::json body = nlohmann::json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw invalid_request("the body is not valid JSON", std::nullopt, "invalid_json");
  RequestExtensions ext;
  ext.priority = integer_header(request, "x-flashq-priority");
  ext.deadline_ms = integer_header(request, "x-flashq-deadline-ms");
  ext.default_max_tokens = options_.default_max_tokens;
  ext.default_seed = std::random_device{}();
  if (!watch_->reachable()) {
    // No broker has answered lately: nothing can be served or refused with certainty now.
    throw ApiError(503, "server_error", "unavailable", "no broker is reachable from the gateway", std::nullopt, 1);
  }
  const auto models = watch_->directory();
  GenerationRequest generation = route == "/v1/chat/completions" ? read_chat_completion_request(body, *models, ext)
                                                                 : read_completion_request(body, *models, ext);
  BrokerLink& link = watch_->link_for(generation.model);
  GenerationCall::start(std::move(generation), route, link, metrics_, responder);
}

}  // namespace flashq::gateway
