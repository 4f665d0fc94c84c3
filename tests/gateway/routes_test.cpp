// The gateway's endpoints as the router reads a path: each route, a response's id, the method it
// answers, and the label /metrics counts it under.
#include "gateway/server/routes.h"

#include <gtest/gtest.h>

namespace flashq::gateway {
namespace {

TEST(Routes, EachEndpointIsMatchedByItsPath) {
  EXPECT_EQ(match_route("/healthz").route, Route::kHealthz);
  EXPECT_EQ(match_route("/readyz").route, Route::kReadyz);
  EXPECT_EQ(match_route("/metrics").route, Route::kMetrics);
  EXPECT_EQ(match_route("/v1/models").route, Route::kModels);
  EXPECT_EQ(match_route("/v1/chat/completions").route, Route::kChatCompletions);
  EXPECT_EQ(match_route("/v1/completions").route, Route::kCompletions);
  EXPECT_EQ(match_route("/v1/responses").route, Route::kResponses);
  EXPECT_EQ(match_route("/v1/nothing").route, Route::kUnknown);
  EXPECT_EQ(match_route("/healthz/").route, Route::kUnknown);
}

TEST(Routes, AResponsePathNamesItsId) {
  const RouteMatch get = match_route("/v1/responses/resp_1");
  EXPECT_EQ(get.route, Route::kResponse);
  EXPECT_EQ(get.response_id, "resp_1");
  const RouteMatch cancel = match_route("/v1/responses/resp_1/cancel");
  EXPECT_EQ(cancel.route, Route::kResponseCancel);
  EXPECT_EQ(cancel.response_id, "resp_1");
  EXPECT_TRUE(match_route("/v1/responses/").response_id.empty()) << "no id: the router answers 404";
}

TEST(Routes, EachRouteAnswersOneMethod) {
  EXPECT_STREQ(route_method(Route::kModels), "GET");
  EXPECT_STREQ(route_method(Route::kChatCompletions), "POST");
  EXPECT_STREQ(route_method(Route::kResponses), "POST");
  EXPECT_STREQ(route_method(Route::kResponse), "GET");
  EXPECT_STREQ(route_method(Route::kResponseCancel), "POST");
}

TEST(Routes, MetricsCountAResponseUnderItsPatternNotItsId) {
  EXPECT_EQ(route_label(match_route("/v1/responses/resp_1").route), "/v1/responses/{id}");
  EXPECT_EQ(route_label(match_route("/v1/responses/resp_1/cancel").route), "/v1/responses/{id}/cancel");
  EXPECT_EQ(route_label(match_route("/anything/a/client/sends").route), "other");
}

TEST(Routes, RefusalsOfOperationsPagesCountAsOther) {
  EXPECT_EQ(match_route("/healthz").counted_as, Route::kUnknown);
  EXPECT_EQ(match_route("/v1/models").counted_as, Route::kModels);
  EXPECT_EQ(match_route("/v1/responses/cancel").route, Route::kResponse) << "a response whose id is 'cancel'";
  EXPECT_EQ(match_route("/v1/responses/cancel").counted_as, Route::kResponseCancel);
}

}  // namespace
}  // namespace flashq::gateway
