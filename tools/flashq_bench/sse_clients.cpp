#include "tools/flashq_bench/sse_clients.h"

#include <utility>  // before Boost.Asio, which uses std::exchange
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <charconv>
#include <future>
#include <mutex>
#include <string_view>
#include <thread>

#include "tools/flashq_bench/bench_peers.h"

namespace flashq::bench {

namespace net = boost::asio;
using tcp = net::ip::tcp;

class SseStream;

struct SseClients::Impl {
  explicit Impl(SseClientsOptions o) : options(std::move(o)), guard(net::make_work_guard(io)) {}

  void note_failure(const std::string& why) {
    ++failures;
    std::lock_guard lock(mutex);
    if (first_failure.empty()) first_failure = why;
  }
  void note_timing(EventTiming timing) {
    std::lock_guard lock(mutex);
    timings.push_back(timing);
  }

  SseClientsOptions options;
  std::string request;
  net::io_context io;
  net::executor_work_guard<net::io_context::executor_type> guard;
  std::vector<std::shared_ptr<SseStream>> streams;  // on the clients' thread only
  std::atomic<std::int64_t> events{0}, open{0}, flowing{0}, done{0}, failures{0};
  mutable std::mutex mutex;
  std::string first_failure;
  std::vector<EventTiming> timings;
  std::thread thread;
};

// One streaming request. Lives while a read or write of its own is pending (shared_ptr held by
// the handlers) and while Impl lists it.
class SseStream : public std::enable_shared_from_this<SseStream> {
 public:
  SseStream(SseClients::Impl& owner) : owner_(owner), socket_(owner.io), request_(owner.request) {}

  void start(const tcp::endpoint& endpoint) {
    socket_.async_connect(endpoint, [self = shared_from_this()](const boost::system::error_code& error) {
      if (error) return self->failed("connect: " + error.message());
      self->socket_.set_option(tcp::no_delay(true));
      net::async_write(self->socket_, net::buffer(self->request_),
                       [self](const boost::system::error_code& e, std::size_t) {
                         if (e) return self->failed("write: " + e.message());
                         self->read();
                       });
    });
  }

  void close() {
    boost::system::error_code ignored;
    closed_ = true;
    socket_.close(ignored);
  }

  std::size_t held_bytes() const {
    return sizeof(*this) + head_.capacity() + line_.capacity() + sse_.capacity();
  }

 private:
  enum class State { kHead, kChunkSize, kChunkData, kChunkEnd, kEnded };

  void read() {
    socket_.async_read_some(net::buffer(buffer_), [self = shared_from_this()](const boost::system::error_code& error,
                                                                              std::size_t n) {
      if (error) {
        if (self->state_ != State::kEnded && !self->closed_) self->failed("read: " + error.message());
        return;
      }
      self->received_ns_ = now_ns();
      self->consume(std::string_view(self->buffer_.data(), n));
      if (self->state_ != State::kEnded) self->read();
    });
  }

  void failed(const std::string& why) {
    if (closed_ || state_ == State::kEnded) return;
    state_ = State::kEnded;
    owner_.note_failure(why);
    close();
  }

  void consume(std::string_view data) {
    while (!data.empty() && state_ != State::kEnded) {
      switch (state_) {
        case State::kHead: {
          head_.append(data);
          data = {};
          const std::size_t end = head_.find("\r\n\r\n");
          if (end == std::string::npos) break;
          if (head_.compare(0, 12, "HTTP/1.1 200") != 0) {
            return failed("answered " + head_.substr(0, head_.find("\r\n")) + ": " + head_.substr(end + 4, 300));
          }
          ++owner_.open;
          const std::string rest = head_.substr(end + 4);
          head_.clear();
          head_.shrink_to_fit();
          state_ = State::kChunkSize;
          consume(rest);
          return;
        }
        case State::kChunkSize: {
          const std::size_t eol = data.find('\n');
          line_.append(data.substr(0, eol == std::string_view::npos ? data.size() : eol + 1));
          data = eol == std::string_view::npos ? std::string_view() : data.substr(eol + 1);
          if (eol == std::string_view::npos) break;
          std::size_t size = 0;
          const auto parsed = std::from_chars(line_.data(), line_.data() + line_.size(), size, 16);
          if (parsed.ec != std::errc()) return failed("a malformed chunk size line: " + line_);
          line_.clear();
          chunk_left_ = size;
          state_ = size == 0 ? State::kEnded : State::kChunkData;
          if (size == 0) end_of_stream();
          break;
        }
        case State::kChunkData: {
          const std::size_t n = std::min(chunk_left_, data.size());
          sse_.append(data.substr(0, n));
          data.remove_prefix(n);
          chunk_left_ -= n;
          if (chunk_left_ == 0) {
            state_ = State::kChunkEnd;
            crlf_left_ = 2;
            events();
          }
          break;
        }
        case State::kChunkEnd: {
          const std::size_t n = std::min(crlf_left_, data.size());
          data.remove_prefix(n);
          crlf_left_ -= n;
          if (crlf_left_ == 0) state_ = State::kChunkSize;
          break;
        }
        case State::kEnded:
          break;
      }
    }
  }

  // Every complete event in sse_: counted (when it carries text), timed, or the end.
  void events() {
    std::size_t start = 0;
    while (true) {
      const std::size_t end = sse_.find("\n\n", start);
      if (end == std::string::npos) break;
      event(std::string_view(sse_).substr(start, end - start));
      start = end + 2;
    }
    sse_.erase(0, start);
  }

  void event(std::string_view e) {
    constexpr std::string_view kData = "data: ", kDone = "data: [DONE]", kText = "\"text\":\"";
    if (e.substr(0, kDone.size()) == kDone) {
      ++owner_.done;  // the connection closes at the body's end, the chunk that follows
      return;
    }
    if (e.substr(0, kData.size()) != kData) return;
    const std::size_t at = e.find(kText);
    if (at == std::string_view::npos || e[at + kText.size()] == '"') return;  // no text: the last chunk
    if (!flowing_) {
      flowing_ = true;
      ++owner_.flowing;
    }
    ++owner_.events;
    if (!owner_.options.record_send_times) return;
    std::int64_t sent = 0;
    const char* digits = e.data() + at + kText.size();
    if (std::from_chars(digits, e.data() + e.size(), sent).ec == std::errc()) owner_.note_timing({sent, received_ns_});
  }

  void end_of_stream() { close(); }

  SseClients::Impl& owner_;
  tcp::socket socket_;
  const std::string& request_;  // shared by every stream
  std::array<char, 4096> buffer_;
  State state_ = State::kHead;
  std::string head_, line_, sse_;
  std::size_t chunk_left_ = 0, crlf_left_ = 0;
  std::int64_t received_ns_ = 0;
  bool flowing_ = false, closed_ = false;
};

SseClients::SseClients(SseClientsOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->request = "POST " + impl_->options.path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Connection: close\r\n"
                   "Content-Length: " + std::to_string(impl_->options.body.size()) + "\r\n\r\n" + impl_->options.body;
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

SseClients::~SseClients() {
  net::post(impl_->io, [impl = impl_.get()] {
    for (auto& stream : impl->streams) stream->close();
    impl->streams.clear();
    impl->guard.reset();
  });
  impl_->thread.join();
}

void SseClients::open(int n) {
  net::post(impl_->io, [impl = impl_.get(), n] {
    const tcp::endpoint endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(impl->options.port));
    for (int i = 0; i < n; ++i) {
      impl->streams.push_back(std::make_shared<SseStream>(*impl));
      impl->streams.back()->start(endpoint);
    }
  });
}

std::int64_t SseClients::events() const { return impl_->events; }
std::int64_t SseClients::streams_open() const { return impl_->open; }
std::int64_t SseClients::streams_flowing() const { return impl_->flowing; }
std::int64_t SseClients::streams_done() const { return impl_->done; }
std::int64_t SseClients::failures() const { return impl_->failures; }

std::string SseClients::first_failure() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->first_failure;
}

std::vector<EventTiming> SseClients::take_timings() {
  std::lock_guard lock(impl_->mutex);
  return std::exchange(impl_->timings, {});
}

std::size_t SseClients::held_bytes() const {
  std::promise<std::size_t> total;
  net::post(impl_->io, [impl = impl_.get(), &total] {
    std::size_t bytes = impl->streams.capacity() * sizeof(std::shared_ptr<SseStream>) + impl->request.capacity();
    for (const auto& stream : impl->streams) bytes += stream->held_bytes();
    total.set_value(bytes);
  });
  return total.get_future().get();
}

}  // namespace flashq::bench
