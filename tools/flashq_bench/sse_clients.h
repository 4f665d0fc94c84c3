// The gateway benchmark's HTTP clients: any number of streaming requests on one thread
// (Boost.Asio, raw sockets, no HTTP library), each a POST with a JSON body answered by a chunked
// stream of server-sent events. They count the events that carry generated text, note when each
// stream opened (status 200), first carried text and ended (`data: [DONE]`), and, when asked,
// read each event's text as a send time (steady clock ns) and keep its receipt time beside it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace flashq::bench {

struct SseClientsOptions {
  int port = 0;  // on 127.0.0.1
  std::string path = "/v1/completions";
  std::string body;             // the JSON body of every request
  bool record_send_times = false;
};

// One event's send time (from its text) and the time a client received it, both steady ns.
struct EventTiming {
  std::int64_t sent_ns = 0;
  std::int64_t received_ns = 0;
};

class SseClients {
 public:
  explicit SseClients(SseClientsOptions options);
  ~SseClients();  // closes every connection
  SseClients(const SseClients&) = delete;
  SseClients& operator=(const SseClients&) = delete;

  // Starts `n` more requests (connect, send) on the clients' thread.
  void open(int n);

  std::int64_t events() const;           // events with text, all streams together
  std::int64_t streams_open() const;     // answered 200
  std::int64_t streams_flowing() const;  // received text
  std::int64_t streams_done() const;     // received [DONE]
  std::int64_t failures() const;         // refused, cut off, or not 200
  std::string first_failure() const;
  // The timings recorded so far (record_send_times), emptied.
  std::vector<EventTiming> take_timings();
  // Bytes the clients themselves hold in memory (their objects and buffers), for memory figures.
  std::size_t held_bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashq::bench
