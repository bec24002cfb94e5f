#pragma once

// An HTTP/1.1 server on 127.0.0.1 (a port the system picks) that serves the files under a folder
// as object stores do: HEAD with the length, GET of one byte range (`Range: bytes=a-b`, `a-`) as
// 206, keep-alive. It fails on command — the next requests answered with an error status, left
// unanswered for a while, cut off half way through the body, or answered 200 with the whole
// file whatever the range — and records the requests' header blocks, for tests of what crosses
// the network (http_storage) and for the HTTP benchmark. Only the loopback address is ever bound.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace crema::test {

class loopback_http_server {
 public:
  // What the server does to one request instead of answering it well.
  enum class fault { status, stall, cut, whole_file };

  explicit loopback_http_server(std::filesystem::path root) : root_(std::move(root)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener_ < 0) throw std::system_error(errno, std::generic_category(), "socket");
    const int on = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      const int code = errno;
      ::close(listener_);
      throw std::system_error(code, std::generic_category(), "loopback server: bind");
    }
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  loopback_http_server(const loopback_http_server&) = delete;
  loopback_http_server& operator=(const loopback_http_server&) = delete;
  ~loopback_http_server() { stop(); }

  // Stops listening and closes every connection; the port refuses from then on.
  void stop() {
    {
      const std::scoped_lock lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      for (const int connection : connections_) ::shutdown(connection, SHUT_RDWR);
    }
    woken_.notify_all();
    ::shutdown(listener_, SHUT_RDWR);
    acceptor_.join();
    for (std::thread& worker : workers_) worker.join();
    ::close(listener_);
  }

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  // "http://127.0.0.1:<port>/<path>"
  [[nodiscard]] std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + std::string(path);
  }

  // The next `count` requests get `what` instead of their answer: `status` (an error status,
  // with a short body), `stall` (nothing for `pause`, then the connection closed), `cut` (the
  // headers and half the body, then closed), `whole_file` (200 and every byte, whatever range).
  void fail_next(std::size_t count, fault what, int status = 503,
                 std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
    const std::scoped_lock lock(mutex_);
    for (std::size_t i = 0; i < count; ++i) faults_.push_back({what, status, pause});
  }

  // Requests received, connections accepted.
  [[nodiscard]] std::size_t requests() const noexcept { return requests_.load(); }
  [[nodiscard]] std::size_t connections() const noexcept { return accepted_.load(); }
  // The request lines and headers of the requests received, oldest first (the last 256).
  [[nodiscard]] std::vector<std::string> received() const {
    const std::scoped_lock lock(mutex_);
    return {received_.begin(), received_.end()};
  }

 private:
  struct planned {
    fault what;
    int status;
    std::chrono::milliseconds pause;
  };

  void accept_loop() {
    for (;;) {
      const int connection = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (connection < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // shut down
      }
      const int on = 1;
      ::setsockopt(connection, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      const std::scoped_lock lock(mutex_);
      if (stopping_) {
        ::close(connection);
        return;
      }
      ++accepted_;
      connections_.push_back(connection);
      workers_.emplace_back([this, connection] { serve(connection); });
    }
  }

  // One connection: requests until the client closes it, a fault closes it, or the server stops.
  void serve(int connection) {
    std::string buffer;
    for (;;) {
      std::size_t end = buffer.find("\r\n\r\n");
      while (end == std::string::npos) {
        char chunk[4096];
        const ::ssize_t got = ::recv(connection, chunk, sizeof chunk, 0);
        if (got <= 0) {
          close_connection(connection);
          return;
        }
        buffer.append(chunk, static_cast<std::size_t>(got));
        end = buffer.find("\r\n\r\n");
      }
      const std::string head = buffer.substr(0, end);
      buffer.erase(0, end + 4);
      if (!answer(connection, head)) {
        close_connection(connection);
        return;
      }
    }
  }

  void close_connection(int connection) {
    const std::scoped_lock lock(mutex_);
    std::erase(connections_, connection);
    ::close(connection);
  }

  static std::string lowered(std::string_view text) {
    std::string low(text);
    for (char& c : low) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return low;
  }

  static std::optional<std::string> header(std::string_view head, std::string_view name) {
    const std::string low = lowered(head);
    const std::string key = "\r\n" + std::string(name) + ":";
    const std::size_t at = low.find(key);
    if (at == std::string::npos) return std::nullopt;
    std::size_t from = at + key.size();
    const std::size_t to = std::min(head.find("\r\n", from), head.size());
    while (from < to && head[from] == ' ') ++from;
    return std::string(head.substr(from, to - from));
  }

  static bool send_all(int connection, std::string_view bytes, int flags = 0) {
    while (!bytes.empty()) {
      const ::ssize_t sent = ::send(connection, bytes.data(), bytes.size(), MSG_NOSIGNAL | flags);
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
    return true;
  }

  // The file's bytes from the kernel's page cache to the socket, with no copy through the server.
  static bool send_file(int connection, int file, std::uint64_t from, std::uint64_t count) {
    auto offset = static_cast<::off_t>(from);
    while (count > 0) {
      const ::ssize_t sent =
          ::sendfile(connection, file, &offset,
                     static_cast<std::size_t>(std::min<std::uint64_t>(count, 1 << 30)));
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) return false;
      count -= static_cast<std::uint64_t>(sent);
    }
    return true;
  }

  bool simple(int connection, int status, std::string_view reason, std::string_view body) {
    return send_all(connection, "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
                                    "\r\nContent-Length: " + std::to_string(body.size()) +
                                    "\r\nContent-Type: text/plain\r\n\r\n" + std::string(body));
  }

  // Answers one request; false where the connection is to be closed.
  bool answer(int connection, const std::string& head) {
    ++requests_;
    std::optional<planned> plan;
    {
      const std::scoped_lock lock(mutex_);
      received_.push_back(head);
      if (received_.size() > 256) received_.pop_front();
      if (!faults_.empty()) {
        plan = faults_.front();
        faults_.pop_front();
      }
    }
    if (plan && plan->what == fault::status) {
      return simple(connection, plan->status, "Injected", "injected failure");
    }
    if (plan && plan->what == fault::stall) {
      std::unique_lock lock(mutex_);
      woken_.wait_for(lock, plan->pause, [this] { return stopping_; });
      return false;
    }
    const std::size_t space = head.find(' ');
    const std::size_t second = head.find(' ', space + 1);
    const std::string method = head.substr(0, space);
    std::string target = head.substr(space + 1, second - space - 1);
    if (const std::size_t query = target.find('?'); query != std::string::npos) {
      target.resize(query);
    }
    if (method != "GET" && method != "HEAD") {
      return simple(connection, 405, "Method Not Allowed", "GET and HEAD only");
    }
    if (target.empty() || target[0] != '/' || target.find("..") != std::string::npos) {
      return simple(connection, 404, "Not Found", "no such object");
    }
    const std::filesystem::path path = root_ / target.substr(1);
    const int file = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat status {};
    if (file < 0 || ::fstat(file, &status) != 0 || !S_ISREG(status.st_mode)) {
      if (file >= 0) ::close(file);
      return simple(connection, 404, "Not Found", "no such object");
    }
    const auto size = static_cast<std::uint64_t>(status.st_size);
    bool kept = true;
    if (method == "HEAD") {
      kept = send_all(connection, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(size) +
                                      "\r\nAccept-Ranges: bytes\r\n\r\n");
    } else {
      std::uint64_t first = 0;
      std::uint64_t last = size == 0 ? 0 : size - 1;
      bool ranged = false;
      if (const auto range = header(head, "range");
          range && range->starts_with("bytes=") && !(plan && plan->what == fault::whole_file)) {
        const std::string spec = range->substr(6);
        const std::size_t dash = spec.find('-');
        first = static_cast<std::uint64_t>(std::stoull(spec.substr(0, dash)));
        if (dash + 1 < spec.size())
          last = std::min<std::uint64_t>(last, std::stoull(spec.substr(dash + 1)));
        ranged = true;
      }
      if (ranged && (first >= size || first > last)) {
        ::close(file);
        return send_all(connection,
                        "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" +
                            std::to_string(size) + "\r\nContent-Length: 0\r\n\r\n");
      }
      const std::uint64_t count = size == 0 ? 0 : last - first + 1;
      std::string headers = ranged ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " +
                                         std::to_string(first) + "-" + std::to_string(last) + "/" +
                                         std::to_string(size) + "\r\n"
                                   : std::string("HTTP/1.1 200 OK\r\n");
      headers += "Content-Length: " + std::to_string(count) + "\r\n\r\n";
      const bool cut = plan && plan->what == fault::cut;
      kept = send_all(connection, headers, MSG_MORE) &&
             send_file(connection, file, first, cut ? count / 2 : count) && !cut;
    }
    ::close(file);
    return kept;
  }

  std::filesystem::path root_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::thread acceptor_;
  mutable std::mutex mutex_;
  std::condition_variable woken_;
  bool stopping_ = false;
  std::vector<int> connections_;
  std::vector<std::thread> workers_;
  std::deque<planned> faults_;
  std::deque<std::string> received_;
  std::atomic<std::size_t> requests_{0};
  std::atomic<std::size_t> accepted_{0};
};

}  // namespace crema::test
