// A plain HTTP GET on loopback for tests (HTTP/1.0: the server closes after answering), and
// the raw TCP pieces it is made of, for tests that speak to a port byte by byte.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

namespace flashq::testing {

// A connected loopback TCP socket (or -1), for raw HTTP and for throwing garbage at a port.
inline int connect_tcp(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads whatever `fd` sends until it closes or `timeout` passes.
inline std::string read_until_closed(int fd, std::chrono::milliseconds timeout) {
  std::string data;
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    pollfd item{fd, POLLIN, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (::poll(&item, 1, static_cast<int>(std::max<int64_t>(left, 1))) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  return data;
}

struct HttpResponse {
  int status = -1;  // -1: no answer
  std::string body;
};

// GET http://127.0.0.1:port/path (HTTP/1.0, so the server closes after answering).
inline HttpResponse http_get(int port, const std::string& path,
                             std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  HttpResponse response;
  const int fd = connect_tcp(port);
  if (fd < 0) return response;
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
    const std::string raw = read_until_closed(fd, timeout);
    const size_t space = raw.find(' ');
    if (raw.rfind("HTTP/", 0) == 0 && space != std::string::npos) {
      response.status = std::atoi(raw.c_str() + space + 1);
      const size_t body = raw.find("\r\n\r\n");
      if (body != std::string::npos) response.body = raw.substr(body + 4);
    }
  }
  ::close(fd);
  return response;
}

}  // namespace flashq::testing
