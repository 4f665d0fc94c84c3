// flashq's one HTTP/1.1 server (the gateway's API, the broker's and the worker's /metrics and
// health pages): asynchronous I/O (Boost.Asio, requests parsed by Boost.Beast) on a few threads,
// so that thousands of open streams cost memory, not threads. Each connection reads one request
// at a time (keep-alive) and hands it to the handler with a Responder, through which the answer
// is written whole or as a stream of chunks (server-sent events). What the server answers itself
// (a body too large, a malformed request, a handler that threw) is a JSON error object in the
// shape OpenAI's clients read: {"error": {"message", "type", "param", "code"}}.
//
// A stream's writes are queued per connection up to a bound; a client that does not read fast
// enough is dropped when its queue passes the bound, so one slow reader never slows the server
// or holds unbounded memory. A client that goes away is noticed while its answer is pending
// (the connection is watched for end of file) and the handler hears it through on_disconnect.
#pragma once

#include <boost/beast/http.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace flashq {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// How a handler answers its request. Thread-safe; calls after the answer ended (or after the
// client went away) do nothing.
class Responder {
 public:
  virtual ~Responder() = default;
  // The whole answer.
  virtual void respond(int status, std::string content_type, std::string body, HttpHeaders headers = {}) = 0;
  // Starts a chunked answer (e.g. text/event-stream); write() sends each piece, end() the last.
  virtual void start_stream(int status, std::string content_type, HttpHeaders headers = {}) = 0;
  virtual void write(std::string data) = 0;
  virtual void end() = 0;
  // Called once, on a server thread, when the client goes away (or is dropped as too slow)
  // before the answer ended. Set it before the answer can end.
  virtual void on_disconnect(std::function<void()> callback) = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<Responder>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see HttpServer::port)
  int threads = 2;
  std::size_t max_body_bytes = 16u << 20;   // larger: 413
  std::size_t max_queued_bytes = 1u << 20;  // per connection; past it the client is dropped
  int request_timeout_s = 60;               // to read one request, and idle keep-alive
};

// Listens at construction (so the port is known and taken at once); serves from run() until
// stop().
class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Serves on options.threads threads (the caller's among them) until stop().
  void run();
  // From any thread (or a signal watcher): stops accepting and returns run().
  void stop();
  // Connections open now.
  std::size_t open_connections() const;

  struct State;  // the I/O context, acceptor and options; connections refer to it

 private:
  std::shared_ptr<State> state_;
};

}  // namespace flashq
