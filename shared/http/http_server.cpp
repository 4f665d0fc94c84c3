#include "shared/http/http_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "shared/error.h"

namespace flashq {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) + "\r\n";
}

std::string header_lines(const HttpHeaders& headers) {
  std::string out;
  for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
  return out;
}

// One piece of a chunked body (RFC 9112 7.1): its length in hex, the bytes.
std::string chunk(std::string_view data) {
  char length[20];
  const int n = std::snprintf(length, sizeof length, "%zx\r\n", data.size());
  std::string out(length, static_cast<std::size_t>(n));
  out.append(data);
  out += "\r\n";
  return out;
}

// OpenAI's error object, for what the server answers itself (before any handler sees the request).
std::string error_json(const std::string& message, const char* type, const char* code) {
  return nlohmann::json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}}.dump();
}

// An IP address as it is, a host name (localhost) as the resolver gives its first address.
tcp::endpoint listen_endpoint(net::io_context& io, const std::string& host, int port) {
  beast::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (!ec) return {address, static_cast<unsigned short>(port)};
  tcp::resolver resolver(io);
  const auto found = resolver.resolve(host, std::to_string(port), ec);
  if (ec || found.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "cannot listen on " + host + ": neither an IP address nor a known host");
  }
  return found.begin()->endpoint();
}

}  // namespace

// Declared so that the I/O context goes first: destroying it destroys the handlers still
// queued, and with them the connections, which count themselves out of `connections`.
struct HttpServer::State {
  HttpServerOptions options;
  HttpHandler handler;
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> stopped{false};
  net::io_context io{options.threads};
  tcp::acceptor acceptor{io};

  void accept();
};

namespace {

class Connection;

// The Responder of one request on one connection. Holds the connection; answers for a request
// that is no longer the connection's current one do nothing.
class Exchange : public Responder {
 public:
  Exchange(std::shared_ptr<Connection> connection, std::uint64_t number)
      : connection_(std::move(connection)), number_(number) {}
  void respond(int status, std::string content_type, std::string body, HttpHeaders headers) override;
  void start_stream(int status, std::string content_type, HttpHeaders headers) override;
  void write(std::string data) override;
  void end() override;
  void on_disconnect(std::function<void()> callback) override;

 private:
  std::shared_ptr<Connection> connection_;
  std::uint64_t number_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  static constexpr std::size_t kMaxPiecesPerWrite = 64;

  Connection(tcp::socket socket, HttpServer::State& server)
      : socket_(std::move(socket)), strand_(socket_.get_executor()), timer_(strand_), server_(server) {
    ++server_.connections;
  }
  ~Connection() { --server_.connections; }

  void start() {
    net::dispatch(strand_, [self = shared_from_this()] { self->read_request(); });
  }

  // From any thread: run `work` on this connection's strand if `number` is still its request.
  template <typename Work>
  void on_strand(std::uint64_t number, Work work) {
    net::dispatch(strand_, [self = shared_from_this(), number, work = std::move(work)]() mutable {
      if (self->closed_ || number != self->request_number_ || self->answered_) return;
      work(*self);
    });
  }

  void respond(int status, const std::string& content_type, const std::string& body, const HttpHeaders& headers) {
    std::string out = status_line(status) + "Content-Type: " + content_type + "\r\n" +
                      "Content-Length: " + std::to_string(body.size()) + "\r\n" + header_lines(headers);
    if (!keep_alive_) out += "Connection: close\r\n";
    out += "\r\n";
    out += body;
    answered_ = true;
    queue(std::move(out));
  }

  void start_stream(int status, const std::string& content_type, const HttpHeaders& headers) {
    streaming_ = true;
    queue(status_line(status) + "Content-Type: " + content_type + "\r\nCache-Control: no-cache\r\n" +
          "Transfer-Encoding: chunked\r\n" + (keep_alive_ ? "" : "Connection: close\r\n") + header_lines(headers) +
          "\r\n");
  }

  void write_chunk(const std::string& data) {
    if (streaming_ && !data.empty()) queue(chunk(data));
  }

  void end_stream() {
    if (!streaming_) return;
    answered_ = true;
    queue("0\r\n\r\n");
  }

  void set_disconnect(std::function<void()> callback) { on_disconnect_ = std::move(callback); }

 private:
  void read_request() {
    parser_.emplace();
    parser_->body_limit(server_.options.max_body_bytes);
    parser_->header_limit(64 * 1024);
    arm_timer();
    http::async_read(socket_, buffer_, *parser_,
                     net::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       self->on_request(ec);
                     }));
  }

  void arm_timer() {
    timer_.expires_after(std::chrono::seconds(server_.options.request_timeout_s));
    timer_.async_wait([self = shared_from_this(), number = request_number_](beast::error_code ec) {
      // Still reading the same request when the timer fires: idle or too slow to send it.
      if (!ec && !self->closed_ && self->reading_request_ && number == self->request_number_) self->close();
    });
    reading_request_ = true;
  }

  void on_request(beast::error_code ec) {
    reading_request_ = false;
    timer_.cancel();
    if (closed_) return;
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      answered_ = false;
      respond(413, "application/json",
              error_json("the request body is larger than the server accepts (" +
                             std::to_string(server_.options.max_body_bytes) + " bytes)",
                         "invalid_request_error", "request_too_large"),
              {});
      return;
    }
    if (ec) {
      if (ec != http::error::end_of_stream && ec != net::error::eof && ec != net::error::operation_aborted &&
          ec != net::error::connection_reset) {
        keep_alive_ = false;
        answered_ = false;
        respond(400, "application/json",
                error_json("malformed HTTP request: " + ec.message(), "invalid_request_error", "bad_request"), {});
        return;
      }
      close();
      return;
    }
    request_ = parser_->release();
    keep_alive_ = request_.keep_alive();
    ++request_number_;
    answered_ = false;
    streaming_ = false;
    on_disconnect_ = nullptr;
    watch_for_close();
    auto exchange = std::make_shared<Exchange>(shared_from_this(), request_number_);
    try {
      server_.handler(request_, exchange);
    } catch (const std::exception& e) {
      spdlog::error("http: handler failed: {}", e.what());
      if (!answered_ && !streaming_) {
        respond(500, "application/json", error_json("internal error", "server_error", "internal"), {});
      }
    }
  }

  // While an answer is pending the client sends nothing (no pipelining): the socket becoming
  // readable is the client closing (or sending a next request early, which is kept for
  // read_request). The look is a non-blocking peek: a wait that completed just before the next
  // request's read took the bytes, or a spurious wake-up, must never block an I/O thread.
  void watch_for_close() {
    socket_.async_wait(
        tcp::socket::wait_read,
        net::bind_executor(strand_, [self = shared_from_this(), number = request_number_](beast::error_code ec) {
          if (ec || self->closed_ || number != self->request_number_ || self->answered_ || self->reading_request_) {
            return;  // cancelled, or the answer ended: nothing to watch for
          }
          char probe;
          beast::error_code peek_error;
          self->socket_.non_blocking(true, peek_error);
          const std::size_t n = self->socket_.receive(net::buffer(&probe, 1), tcp::socket::message_peek, peek_error);
          if (peek_error == net::error::would_block || peek_error == net::error::try_again) {
            self->watch_for_close();  // nothing there after all: keep watching
          } else if (peek_error || n == 0) {
            self->close();  // end of file or a reset: the client left
          }
          // n > 0: the next request's bytes, left for read_request.
        }));
  }

  void queue(std::string data) {
    if (closed_) return;
    queued_bytes_ += data.size();
    if (queued_bytes_ > server_.options.max_queued_bytes) {
      spdlog::warn("http: dropping a client that reads too slowly ({} bytes queued)", queued_bytes_);
      close();
      return;
    }
    outbox_.push_back(std::move(data));
    if (!writing_) write_next();
  }

  void write_next() {
    if (outbox_.empty()) {
      writing_ = 0;
      if (answered_) {
        if (!keep_alive_) {
          close();
        } else if (!reading_request_) {
          socket_.cancel();  // the close watch; the next request's read takes over
          read_request();
        }
      }
      return;
    }
    // Every piece queued goes out in one gather write: under load a stream's events leave in
    // one system call (and few TCP segments), not one each.
    writing_ = std::min(outbox_.size(), kMaxPiecesPerWrite);
    std::vector<net::const_buffer> pieces;
    pieces.reserve(writing_);
    for (std::size_t i = 0; i < writing_; ++i) pieces.push_back(net::buffer(outbox_[i]));
    net::async_write(socket_, pieces,
                     net::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                       const std::size_t written = std::exchange(self->writing_, 0);
                       if (ec || self->closed_) {
                         self->close();
                         self->outbox_.clear();  // no write holds its buffers any more
                         return;
                       }
                       self->queued_bytes_ -= n;
                       self->outbox_.erase(self->outbox_.begin(), self->outbox_.begin() + written);
                       self->write_next();
                     }));
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    // A write in flight still reads its buffers until its handler runs: that clears them.
    if (!writing_) outbox_.clear();
    if (!answered_ && on_disconnect_) {
      auto callback = std::move(on_disconnect_);
      on_disconnect_ = nullptr;
      callback();
    }
  }

  tcp::socket socket_;
  net::strand<net::any_io_executor> strand_;
  net::steady_timer timer_;
  HttpServer::State& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;
  std::uint64_t request_number_ = 0;
  bool keep_alive_ = true;
  bool reading_request_ = false;
  bool answered_ = false;
  bool streaming_ = false;
  std::size_t writing_ = 0;  // pieces at the outbox's front in the write in flight
  std::atomic<bool> closed_{false};
  std::deque<std::string> outbox_;
  std::size_t queued_bytes_ = 0;
  std::function<void()> on_disconnect_;

  friend class Exchange;
};

void Exchange::respond(int status, std::string content_type, std::string body, HttpHeaders headers) {
  connection_->on_strand(number_,
                         [status, type = std::move(content_type), body = std::move(body),
                          headers = std::move(headers)](Connection& c) { c.respond(status, type, body, headers); });
}

void Exchange::start_stream(int status, std::string content_type, HttpHeaders headers) {
  connection_->on_strand(number_, [status, type = std::move(content_type), headers = std::move(headers)](
                                      Connection& c) { c.start_stream(status, type, headers); });
}

void Exchange::write(std::string data) {
  connection_->on_strand(number_, [data = std::move(data)](Connection& c) { c.write_chunk(data); });
}

void Exchange::end() {
  connection_->on_strand(number_, [](Connection& c) { c.end_stream(); });
}

void Exchange::on_disconnect(std::function<void()> callback) {
  connection_->on_strand(
      number_, [callback = std::move(callback)](Connection& c) mutable { c.set_disconnect(std::move(callback)); });
}

}  // namespace

void HttpServer::State::accept() {
  acceptor.async_accept(net::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (stopped) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true));
      std::make_shared<Connection>(std::move(socket), *this)->start();
    } else {
      spdlog::warn("http: accept failed: {}", ec.message());
    }
    accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler) : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  state_->handler = std::move(handler);
  beast::error_code ec;
  const tcp::endpoint endpoint = listen_endpoint(state_->io, state_->options.host, state_->options.port);
  state_->acceptor.open(endpoint.protocol());
  state_->acceptor.set_option(net::socket_base::reuse_address(true));
  state_->acceptor.bind(endpoint, ec);
  if (ec) {
    throw Error(ErrorCode::kIo, "cannot listen on " + state_->options.host + ":" +
                                    std::to_string(state_->options.port) + ": " + ec.message());
  }
  state_->acceptor.listen(net::socket_base::max_listen_connections);
  state_->accept();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return state_->acceptor.local_endpoint().port(); }

void HttpServer::run() {
  std::vector<std::thread> others;
  for (int i = 1; i < state_->options.threads; ++i) others.emplace_back([this] { state_->io.run(); });
  state_->io.run();
  for (std::thread& t : others) t.join();
}

void HttpServer::stop() {
  if (state_->stopped.exchange(true)) return;
  net::post(state_->io, [state = state_.get()] {
    beast::error_code ignored;
    state->acceptor.close(ignored);
  });
  state_->io.stop();
}

std::size_t HttpServer::open_connections() const { return state_->connections; }

}  // namespace flashq
