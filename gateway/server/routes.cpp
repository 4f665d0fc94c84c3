// The gateway's endpoints: paths, methods and metric labels in one table.
#include "gateway/server/routes.h"

#include <array>

namespace flashq::gateway {
namespace {

struct RouteEntry {
  Route route;
  std::string label;  // the path, or the path's pattern
  const char* method;
};

const std::array<RouteEntry, 10> kRoutes = {{
    {Route::kHealthz, "/healthz", "GET"},
    {Route::kReadyz, "/readyz", "GET"},
    {Route::kMetrics, "/metrics", "GET"},
    {Route::kModels, "/v1/models", "GET"},
    {Route::kChatCompletions, "/v1/chat/completions", "POST"},
    {Route::kCompletions, "/v1/completions", "POST"},
    {Route::kResponses, "/v1/responses", "POST"},
    {Route::kResponse, "/v1/responses/{id}", "GET"},
    {Route::kResponseCancel, "/v1/responses/{id}/cancel", "POST"},
    {Route::kUnknown, "other", "GET"},
}};

constexpr std::string_view kResponsePrefix = "/v1/responses/";
constexpr std::string_view kCancelSuffix = "/cancel";

const RouteEntry& entry(Route route) {
  for (const RouteEntry& e : kRoutes) {
    if (e.route == route) return e;
  }
  return kRoutes.back();
}

}  // namespace

RouteMatch match_route(std::string_view path) {
  for (const RouteEntry& e : kRoutes) {
    if (e.label.find('{') == std::string::npos && path == e.label) {
      return {e.route, "", is_operations_route(e.route) ? Route::kUnknown : e.route};
    }
  }
  if (path.substr(0, kResponsePrefix.size()) != kResponsePrefix) return {Route::kUnknown, "", Route::kUnknown};
  const bool ends_in_cancel = path.size() > kCancelSuffix.size() && path.ends_with(kCancelSuffix);
  std::string_view id = path.substr(kResponsePrefix.size());
  const bool cancel = id.size() > kCancelSuffix.size() && id.ends_with(kCancelSuffix);
  if (cancel) id.remove_suffix(kCancelSuffix.size());
  return {cancel ? Route::kResponseCancel : Route::kResponse, std::string(id),
          ends_in_cancel ? Route::kResponseCancel : Route::kResponse};
}

const std::string& route_label(Route route) { return entry(route).label; }

const char* route_method(Route route) { return entry(route).method; }

bool is_operations_route(Route route) {
  return route == Route::kHealthz || route == Route::kReadyz || route == Route::kMetrics;
}

}  // namespace flashq::gateway
