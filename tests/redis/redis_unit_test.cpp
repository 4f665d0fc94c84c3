// The pieces of the Redis store: URLs, a job as flat fields, and the pipeline's promise to keep
// writes across a Redis restart (against a real redis-server).
#include <gtest/gtest.h>

#include "broker/redis/redis_job_fields.h"
#include "broker/redis/redis_pipeline.h"
#include "broker/redis/redis_schema.h"
#include "broker/redis/redis_url.h"
#include "shared/error.h"
#include "tests/protocol/protocol_test_util.h"
#include "tests/support/redis_server.h"
#include "tests/support/temp_dir.h"

namespace flashq {
namespace {

using testing::RedisServer;
using protocol::testing::full_job;

ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

TEST(RedisUrl, HostPortDatabaseAndAuth) {
  RedisUrl plain = parse_redis_url("redis://localhost");
  EXPECT_EQ(plain.host, "localhost");
  EXPECT_EQ(plain.port, 6379);
  EXPECT_EQ(plain.database, 0);
  EXPECT_TRUE(plain.password.empty());

  RedisUrl full = parse_redis_url("redis://app:s3cret@10.0.0.5:7000/3");
  EXPECT_EQ(full.username, "app");
  EXPECT_EQ(full.password, "s3cret");
  EXPECT_EQ(full.host, "10.0.0.5");
  EXPECT_EQ(full.port, 7000);
  EXPECT_EQ(full.database, 3);
  EXPECT_EQ(full.describe().find("s3cret"), std::string::npos) << "passwords never reach logs";

  RedisUrl password_only = parse_redis_url("redis://:pw@host:1/");
  EXPECT_EQ(password_only.password, "pw");
  EXPECT_TRUE(password_only.username.empty());

  RedisUrl unix_socket = parse_redis_url("unix:///run/redis.sock?db=2");
  EXPECT_EQ(unix_socket.unix_path, "/run/redis.sock");
  EXPECT_EQ(unix_socket.database, 2);
}

TEST(RedisUrl, BadUrlsAreConfigErrors) {
  for (const char* url : {"http://host", "redis://", "redis://host:notaport", "redis://host:70000", "redis://host:0",
                          "redis://host/db", "redis://user:@host", "unix://relative", "unix:///s?x=1"}) {
    EXPECT_EQ(code_of([&] { parse_redis_url(url); }), ErrorCode::kBadConfig) << url;
  }
}

RedisFields as_map(const std::vector<std::string>& flat) {
  RedisFields fields;
  for (size_t i = 0; i + 1 < flat.size(); i += 2) fields[flat[i]] = flat[i + 1];
  return fields;
}

TEST(RedisJobFields, RoundTrip) {
  const protocol::Job job = full_job();
  EXPECT_EQ(job_from_fields(as_map(job_to_fields(job))), job);

  protocol::Job tokens = full_job();
  tokens.prompt = protocol::TokenIds{1, 2, 3};
  EXPECT_EQ(job_from_fields(as_map(job_to_fields(tokens))), tokens);

  protocol::Job chat = full_job();
  chat.prompt = std::vector<protocol::ChatMessage>{{"system", "be brief"}, {"user", "hi"}};
  EXPECT_EQ(job_from_fields(as_map(job_to_fields(chat))), chat);
}

TEST(RedisJobFields, WhatRedisCliProducersWrite) {
  const protocol::Job job =
      job_from_fields({{"prompt", "hello"}, {"max_tokens", "5"}, {"stop", "\n"}, {"stream", "1"}, {"mine", "x"}});
  EXPECT_TRUE(job.id.empty());
  EXPECT_EQ(std::get<std::string>(job.prompt), "hello");
  EXPECT_EQ(job.max_tokens, 5);
  EXPECT_EQ(job.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(job.stream);
}

// Chat jobs keep their tool calls, tool results, tools and template options through Redis,
// with the producer's key order (templates render tool definitions key by key).
TEST(RedisJobFields, ChatJobsWithToolsRoundTrip) {
  protocol::Job chat = full_job();
  chat.metadata.reset();
  protocol::ChatMessage call{.role = "assistant", .content = std::nullopt};
  call.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"}, {"", "lookup", R"("{\"q\": 1}")"}};
  call.reasoning_content = "thinking";
  protocol::ChatMessage result{.role = "tool", .content = "18 C"};
  result.tool_call_id = "call_1";
  result.name = "get_weather";
  chat.prompt = std::vector<protocol::ChatMessage>{{"user", "weather?"}, call, result};
  chat.tools = R"([{"type":"function","function":{"name":"get_weather","description":"d","parameters":{}}}])";
  chat.chat_template_kwargs = R"({"enable_thinking":false,"date_string":"1 Jan 2025"})";
  chat.add_generation_prompt = false;
  const std::vector<std::string> flat = job_to_fields(chat);
  const RedisFields fields = as_map(flat);
  EXPECT_EQ(fields.at("tools"), *chat.tools);
  EXPECT_EQ(fields.at("chat_template_kwargs"), *chat.chat_template_kwargs);
  EXPECT_EQ(fields.at("add_generation_prompt"), "false");
  EXPECT_EQ(job_from_fields(fields), chat);
}

TEST(RedisJobFields, WhatRedisCliProducersWriteForChat) {
  const protocol::Job job = job_from_fields(
      {{"messages", R"([{"role":"user","content":"hi"}])"},
       {"tools", R"([{"type":"function","function":{"name":"f"}}])"},
       {"chat_template_kwargs", R"({"enable_thinking":true})"},
       {"add_generation_prompt", "1"}});
  EXPECT_EQ(job.tools, R"([{"type":"function","function":{"name":"f"}}])");
  EXPECT_EQ(job.chat_template_kwargs, R"({"enable_thinking":true})");
  EXPECT_TRUE(job.add_generation_prompt);
}

TEST(RedisJobFields, EveryBadFieldIsAProtocolErrorNamingIt) {
  const std::vector<std::pair<RedisFields, std::string>> cases = {
      {{{"max_tokens", "5"}}, "prompt"},
      {{{"prompt", "x"}, {"max_tokens", "five"}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", "0"}}, "max_tokens"},
      {{{"prompt", "x"}, {"temperature", "hot"}}, "temperature"},
      {{{"prompt", "x"}, {"temperature", "-1"}}, "temperature"},
      {{{"prompt", "x"}, {"top_p", "nan"}}, "top_p"},
      {{{"prompt", "x"}, {"seed", "-1"}}, "seed"},
      {{{"prompt", "x"}, {"stream", "maybe"}}, "stream"},
      {{{"prompt_tokens", "[1, 2"}}, "prompt_tokens"},
      {{{"prompt_tokens", "[\"a\"]"}}, "prompt_tokens"},
      {{{"messages", "{}"}}, "messages"},
      {{{"prompt", "x"}, {"spec", "fast"}}, "spec"},
      {{{"prompt", "x"}, {"id", "has space"}}, "id"},
      {{{"prompt", "x"}, {"metadata", "{oops"}}, "metadata"},
      {{{"prompt", "x"}, {"prompt_tokens", "[1]"}}, "prompt"},
      {{{"messages", R"([{"role":"user","content":"x"}])"}, {"tools", "[{"}}, "tools"},
      {{{"messages", R"([{"role":"user","content":"x"}])"}, {"tools", "{}"}}, "tools"},
      {{{"messages", R"([{"role":"user","content":"x"}])"}, {"chat_template_kwargs", "[]"}}, "chat_template_kwargs"},
      {{{"messages", R"([{"role":"user","content":"x"}])"}, {"chat_template_kwargs", R"({"tools":1})"}},
       "chat_template_kwargs"},
      {{{"messages", R"([{"role":"user","content":"x"}])"}, {"add_generation_prompt", "yes"}}, "add_generation_prompt"},
      {{{"prompt", "x"}, {"tools", "[]"}}, "tools"},
      {{{"messages", R"([{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}])"}}, "arguments"},
      // Nested deeper than a message may be: refused before anything walks it recursively.
      {{{"prompt", "x"}, {"metadata", std::string(200000, '[') + std::string(200000, ']')}}, "metadata"},
      {{{"prompt", "x"}, {"stop", std::string(200000, '[') + std::string(200000, ']')}}, "stop"},
      {{{"messages", R"([{"role":"user","content":"x"}])"}, {"tools", std::string(200000, '[')}}, "tools"},
  };
  for (const auto& [fields, name] : cases) {
    try {
      job_from_fields(fields);
      ADD_FAILURE() << "accepted a job with a bad " << name;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kProtocol) << e.what();
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// The wire does not check that strings are UTF-8; Redis entries hold some fields as JSON, which
// cannot carry other bytes: they are written as U+FFFD, never thrown from the JSON library.
TEST(RedisJobFields, InvalidUtf8AndNonJsonMetadataAreWrittenOrRefusedTyped) {
  protocol::Job job = full_job();
  job.stop = {"ok", "bad\xff"};
  job.prompt = std::vector<protocol::ChatMessage>{{"user", "caf\xc3"}};
  const protocol::Job back = job_from_fields(as_map(job_to_fields(job)));
  EXPECT_EQ(back.stop, (std::vector<std::string>{"ok", "bad\xef\xbf\xbd"}));
  EXPECT_EQ(std::get<std::vector<protocol::ChatMessage>>(back.prompt)[0].content, "caf\xef\xbf\xbd");

  job.metadata = std::string("\x81\x01\x02", 3);  // {1: 2}: JSON keys are strings
  EXPECT_EQ(code_of([&] { job_to_fields(job); }), ErrorCode::kProtocol);

  protocol::FinalResult result = protocol::testing::full_final_result();
  result.finish_reason = protocol::FinishReason::kError;
  result.error = "worker said \xfe";
  EXPECT_EQ(redis_schema::final_from_json(redis_schema::final_to_json(result)).error, "worker said \xef\xbf\xbd");
}

TEST(RedisSchema, FinalResultsSurviveJson) {
  const protocol::FinalResult result = protocol::testing::full_final_result();
  EXPECT_EQ(redis_schema::final_from_json(redis_schema::final_to_json(result)), result);
  EXPECT_EQ(code_of([] { redis_schema::final_from_json("not json"); }), ErrorCode::kProtocol);
  EXPECT_EQ(code_of([] { redis_schema::final_from_json("{\"finish_reason\": \"bored\"}"); }), ErrorCode::kProtocol);
}

TEST(RedisConnection, UnreachableRedisIsNotAnExceptionUntilUsed) {
  RedisConnection connection(parse_redis_url("redis://127.0.0.1:" + std::to_string(testing::free_port())),
                             std::chrono::milliseconds(200));
  EXPECT_FALSE(connection.ensure_connected());
  EXPECT_FALSE(connection.last_error().empty());
  EXPECT_EQ(code_of([&] { connection.command({"PING"}); }), ErrorCode::kIo);
}

TEST(RedisConnection, WrongPasswordAndDatabaseAreRefused) {
  testing::TempDir dir;
  RedisServer server(dir.path() / "redis");
  ASSERT_TRUE(server.start({"--requirepass", "right"}));
  const std::string base = "redis://:wrong@127.0.0.1:" + std::to_string(server.port());
  RedisConnection wrong(parse_redis_url(base));
  EXPECT_FALSE(wrong.ensure_connected());
  EXPECT_NE(wrong.last_error().find("refused"), std::string::npos) << wrong.last_error();

  RedisConnection right(parse_redis_url("redis://:right@127.0.0.1:" + std::to_string(server.port()) + "/5"));
  ASSERT_TRUE(right.ensure_connected()) << right.last_error();
  right.command({"SET", "k", "v"});
  testing::RedisClient plain(server.port());
  plain.command({"AUTH", "right"});
  plain.command({"SELECT", "5"});
  EXPECT_EQ(plain.command({"GET", "k"}), std::vector<std::string>{"v"}) << "the URL's database number is used";
}

TEST(RedisPipeline, WritesWaitForRedisToComeBackAndReadsAreDropped) {
  testing::TempDir dir;
  RedisServer server(dir.path() / "redis");
  ASSERT_TRUE(server.start());
  RedisConnection connection(parse_redis_url(server.url()), std::chrono::milliseconds(300));
  ASSERT_TRUE(connection.ensure_connected());
  RedisPipeline pipeline;
  int written = 0, dropped = 0;
  pipeline.add({"RPUSH", "log", "a"}, [&](const RedisReply& r) { written += !r.is_error(); },
               RedisPipeline::OnFailure::kRetry);
  ASSERT_TRUE(pipeline.flush(connection));

  server.kill();
  pipeline.add({"RPUSH", "log", "b"}, [&](const RedisReply& r) { written += !r.is_error(); },
               RedisPipeline::OnFailure::kRetry);
  pipeline.add({"LRANGE", "log", "0", "-1"}, [&](const RedisReply& r) { dropped += r.is_error(); },
               RedisPipeline::OnFailure::kDrop);
  pipeline.add({"RPUSH", "log", "c"}, [&](const RedisReply& r) { written += !r.is_error(); },
               RedisPipeline::OnFailure::kRetry);
  EXPECT_FALSE(pipeline.flush(connection));
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(pipeline.retained(), 2u);

  ASSERT_TRUE(server.start());
  ASSERT_TRUE(testing::eventually([&] { return connection.ensure_connected(); }, std::chrono::milliseconds(10000)));
  ASSERT_TRUE(pipeline.flush(connection));
  EXPECT_EQ(written, 3);
  testing::RedisClient plain(server.port());
  EXPECT_EQ(plain.command({"LRANGE", "log", "0", "-1"}), (std::vector<std::string>{"a", "b", "c"}))
      << "kept in order, across the restart (append-only file)";
}

// The broker's loop sends and goes on: replies are picked up later, without waiting, in order;
// a connection lost with writes in flight sends them again ahead of anything newer.
TEST(RedisPipeline, RepliesArePickedUpWithoutWaitingAndInFlightWritesSurviveALoss) {
  testing::TempDir dir;
  RedisServer server(dir.path() / "redis");
  ASSERT_TRUE(server.start());
  RedisConnection connection(parse_redis_url(server.url()), std::chrono::milliseconds(300));
  ASSERT_TRUE(connection.ensure_connected());
  RedisPipeline pipeline;
  std::vector<int64_t> lengths;
  for (const char* item : {"a", "b", "c"}) {
    pipeline.add({"RPUSH", "log", item}, [&](const RedisReply& r) { lengths.push_back(r.integer); },
                 RedisPipeline::OnFailure::kRetry);
  }
  ASSERT_TRUE(pipeline.send(connection));
  EXPECT_EQ(pipeline.in_flight(), 3u);
  EXPECT_TRUE(lengths.empty()) << "send() does not wait for replies";
  ASSERT_TRUE(testing::eventually(
      [&] {
        EXPECT_TRUE(pipeline.receive(connection));
        return pipeline.in_flight() == 0;
      },
      std::chrono::milliseconds(5000)));
  EXPECT_EQ(lengths, (std::vector<int64_t>{1, 2, 3})) << "handlers run in order";

  // Writes in flight when Redis goes away: kept, and sent first once it is back.
  pipeline.add({"RPUSH", "log", "d"}, nullptr, RedisPipeline::OnFailure::kRetry);
  server.kill();
  (void)pipeline.send(connection);  // may or may not notice yet
  EXPECT_FALSE(pipeline.settle(connection));
  pipeline.add({"RPUSH", "log", "e"}, nullptr, RedisPipeline::OnFailure::kRetry);
  EXPECT_EQ(pipeline.retained(), 2u);
  ASSERT_TRUE(server.start());
  ASSERT_TRUE(testing::eventually([&] { return connection.ensure_connected(); }, std::chrono::milliseconds(10000)));
  ASSERT_TRUE(pipeline.flush(connection));
  testing::RedisClient plain(server.port());
  EXPECT_EQ(plain.command({"LRANGE", "log", "0", "-1"}), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
}

}  // namespace
}  // namespace flashq
