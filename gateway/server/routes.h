// The gateway's endpoints, named once (docs/gateway.md, "Endpoints"): the router matches a path
// to one of them, each answers one method, and /metrics counts requests under its label (a
// response's id written {id}, so clients cannot grow the metrics with paths of their own).
#pragma once

#include <string>
#include <string_view>

namespace flashq::gateway {

enum class Route {
  kHealthz,
  kReadyz,
  kMetrics,
  kModels,
  kChatCompletions,
  kCompletions,
  kResponses,       // POST /v1/responses
  kResponse,        // GET /v1/responses/{id}
  kResponseCancel,  // POST /v1/responses/{id}/cancel
  kUnknown,
};

struct RouteMatch {
  Route route = Route::kUnknown;
  std::string response_id;  // kResponse and kResponseCancel; empty for "/v1/responses/"
  // The route a refusal of the request is counted under: the operations pages count as "other",
  // and a path under /v1/responses/ ending in /cancel as a cancel, whatever its id.
  Route counted_as = Route::kUnknown;
};

// The route a path (without its query) names.
RouteMatch match_route(std::string_view path);

// The route as /metrics labels it: its path, with {id} for a response's id; "other" for kUnknown.
const std::string& route_label(Route route);

// The one method a route answers: "GET" or "POST".
const char* route_method(Route route);

// Operations pages, which ask no key: load balancers and scrapers call them.
bool is_operations_route(Route route);

}  // namespace flashq::gateway
