#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/http/http_storage.hpp>

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

// http_storage's work: compiled once in the crema::http library (src/http/), or included by its
// header, inline, with CREMA_HEADER_ONLY.

namespace crema {

namespace detail {

// libcurl's process-wide setup, once, before the first handle.
CREMA_LIBRARY_INLINE void curl_global_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT); code != CURLE_OK) {
      fail_with_code<io_error>(0, "http_storage: libcurl does not start: {}",
                               curl_easy_strerror(code));
    }
  });
}

// A libcurl header list, freed with it.
struct curl_headers {
  curl_slist* list = nullptr;
  curl_headers() = default;
  curl_headers(const curl_headers&) = delete;
  curl_headers& operator=(const curl_headers&) = delete;
  ~curl_headers() { curl_slist_free_all(list); }
  void add(const std::string& header) {
    curl_slist* grown = curl_slist_append(list, header.c_str());
    if (grown == nullptr) throw std::bad_alloc();
    list = grown;
  }
};

CREMA_LIBRARY_INLINE std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// What one attempt at a request came to.
struct http_attempt {
  std::size_t bytes = 0;     // the body's bytes written where they belong
  long status = 0;           // the HTTP status, 0 where no answer came
  CURLcode code = CURLE_OK;  // libcurl's outcome
  std::string failure;       // why the attempt failed, for the error; empty when it did not
  bool retryable = false;    // whether another attempt may do better
  std::uint64_t length = 0;  // the object's size, where the attempt asked it
};

// Where one GET writes its body: the answer's status is known before the first byte, so an
// error's body is kept as text and a good one goes to the bytes asked for, never past them.
struct http_sink {
  CURL* handle = nullptr;
  std::span<std::byte> into;
  std::uint64_t first = 0;  // the first byte asked for
  std::size_t written = 0;
  std::string error_body;
  std::string fault;                   // a reason to abort: the answer is not the range asked for
  std::optional<std::uint64_t> total;  // the object's size, as Content-Range gives it
};

CREMA_LIBRARY_INLINE std::size_t http_write(char* data, std::size_t size, std::size_t count,
                                            void* user) {
  auto& sink = *static_cast<http_sink*>(user);
  const std::size_t bytes = size * count;
  long status = 0;
  curl_easy_getinfo(sink.handle, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200 && status != 206) {
    const std::size_t kept =
        std::min<std::size_t>(bytes, 200 - std::min<std::size_t>(200, sink.error_body.size()));
    sink.error_body.append(data, kept);
    return bytes;
  }
  if (status == 200 && sink.first != 0) {
    sink.fault = "the server ignores byte ranges (it answered 200 to a range request)";
    return 0;
  }
  if (bytes > sink.into.size() - sink.written) {
    sink.fault = status == 200
                     ? "the server ignores byte ranges (it answered 200 with the whole object)"
                     : "the server sent more bytes than the range asked for";
    return 0;
  }
  std::memcpy(sink.into.data() + sink.written, data, bytes);
  sink.written += bytes;
  return bytes;
}

// Checks a 206's Content-Range against the range asked for, and keeps the object's size it
// gives (`bytes a-b/size`, or a 416's `bytes */size`).
CREMA_LIBRARY_INLINE std::size_t http_header(char* data, std::size_t size, std::size_t count,
                                             void* user) {
  auto& sink = *static_cast<http_sink*>(user);
  const std::size_t bytes = size * count;
  const std::string_view line(data, bytes);
  constexpr std::string_view name = "content-range:";
  const auto number = [](std::string_view text, std::size_t& at) {
    std::uint64_t value = 0;
    const std::size_t from = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      value = value * 10 + static_cast<std::uint64_t>(text[at++] - '0');
    }
    return at > from ? std::optional<std::uint64_t>(value) : std::nullopt;
  };
  if (line.size() > name.size() &&
      std::equal(name.begin(), name.end(), line.begin(),
                 [](char a, char b) { return a == (b >= 'A' && b <= 'Z' ? b - 'A' + 'a' : b); })) {
    std::string_view value = line.substr(name.size());
    value.remove_prefix(std::min(value.find_first_not_of(' '), value.size()));
    if (!value.starts_with("bytes ")) return bytes;
    value.remove_prefix(6);
    std::size_t at = 0;
    if (const auto start = number(value, at); start && *start != sink.first + sink.written) {
      sink.fault = crema::detail::format("the server sent the range from byte {}, not {}", *start,
                                         sink.first + sink.written);
      return 0;
    }
    if (const std::size_t slash = value.find('/'); slash != std::string_view::npos) {
      at = slash + 1;
      sink.total = number(value, at);
    }
  }
  return bytes;
}

// A status that another attempt may get past: a timeout, too many requests, a server's fault.
// What a handle receives into at once (libcurl's default: 16 KiB).
inline constexpr long receive_buffer = 512 * 1024;

constexpr bool retryable_status(long status) noexcept {
  return status == 408 || status == 429 || status >= 500;
}

// A failure no retry gets past: a URL libcurl cannot use, a server whose certificate fails.
constexpr bool lasting_failure(CURLcode code) noexcept {
  return code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL ||
         code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE ||
         code == CURLE_SSL_CERTPROBLEM;
}

CREMA_LIBRARY_INLINE int errno_of_status(long status) noexcept {
  if (status == 404 || status == 410) return ENOENT;
  if (status == 401 || status == 403) return EACCES;
  return EIO;
}

}  // namespace detail

struct http_storage::state {
  explicit state(http_options given) : options(std::move(given)) {
    detail::curl_global_once();
    for (const std::string& header : options.headers) {
      const std::size_t colon = header.find(':');
      if (colon == std::string::npos || colon == 0) {
        detail::fail<config_error>("http_storage: header \"{}\" is not \"Name: value\"", header);
      }
      plain.add(header);
      signed_s3.add(header);
    }
    if (options.cache_bytes != 0 && options.chunk_bytes == 0) {
      detail::fail<config_error>(
          "http_storage: a cache of {} bytes needs chunks of at least a byte", options.cache_bytes);
    }
    const std::string key = detail::environment("AWS_ACCESS_KEY_ID");
    const std::string secret = detail::environment("AWS_SECRET_ACCESS_KEY");
    if (!key.empty() && !secret.empty()) credentials = key + ":" + secret;
    if (!options.aws_sigv4.empty() && credentials.empty()) {
      detail::fail<config_error>(
          "http_storage: aws_sigv4 \"{}\" asks for signed requests, and the environment has no "
          "credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
          options.aws_sigv4);
    }
    // S3 wants the payload's hash named; a GET has none to sign.
    signed_s3.add("x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (const std::string token = detail::environment("AWS_SESSION_TOKEN"); !token.empty()) {
      signed_s3.add("x-amz-security-token: " + token);
    }
    if (options.region.empty()) options.region = detail::environment("AWS_REGION");
    if (options.region.empty()) options.region = detail::environment("AWS_DEFAULT_REGION");
    if (options.region.empty()) options.region = "us-east-1";
    if (options.s3_endpoint.empty())
      options.s3_endpoint = detail::environment("AWS_ENDPOINT_URL_S3");
    if (options.s3_endpoint.empty()) options.s3_endpoint = detail::environment("AWS_ENDPOINT_URL");
    while (!options.s3_endpoint.empty() && options.s3_endpoint.back() == '/') {
      options.s3_endpoint.pop_back();
    }
    s3_sigv4 = "aws:amz:" + options.region + ":s3";
  }
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  ~state() {
    for (CURL* handle : idle) curl_easy_cleanup(handle);
  }

  // Where a URL is read from, and how it is signed.
  struct target {
    std::string url;
    const std::string* sigv4 = nullptr;  // null: not signed
  };

  [[nodiscard]] target target_of(const std::string& url) const {
    constexpr std::string_view s3 = "s3://";
    if (url.starts_with(s3)) {
      const std::size_t slash = url.find('/', s3.size());
      if (slash == std::string::npos || slash == s3.size() || slash + 1 == url.size()) {
        detail::fail<config_error>("shard {}: an S3 URL is s3://bucket/key", url);
      }
      const std::string bucket = url.substr(s3.size(), slash - s3.size());
      const std::string key = url.substr(slash + 1);
      target made;
      made.url = options.s3_endpoint.empty()
                     ? "https://" + bucket + ".s3." + options.region + ".amazonaws.com/" + key
                     : options.s3_endpoint + "/" + bucket + "/" + key;
      if (!credentials.empty()) made.sigv4 = &s3_sigv4;
      return made;
    }
    if (!url.starts_with("http://") && !url.starts_with("https://")) {
      detail::fail<config_error>("shard {}: http_storage reads http://, https:// and s3:// URLs",
                                 url);
    }
    return {url, options.aws_sigv4.empty() ? nullptr : &options.aws_sigv4};
  }

  // A handle of the pool (its connections kept), or a new one; back to the pool when done.
  struct handle_lease {
    const state* owner;
    CURL* handle;
    handle_lease(const state* leased_from, CURL* leased) noexcept
        : owner(leased_from), handle(leased) {}
    handle_lease(const handle_lease&) = delete;
    handle_lease& operator=(const handle_lease&) = delete;
    ~handle_lease() {
      const std::scoped_lock lock(owner->mutex);
      owner->idle.push_back(handle);
    }
  };

  [[nodiscard]] handle_lease lease() const {
    {
      const std::scoped_lock lock(mutex);
      if (!idle.empty()) {
        CURL* handle = idle.back();
        idle.pop_back();
        curl_easy_reset(handle);  // options gone, connections kept
        return {this, handle};
      }
    }
    CURL* handle = curl_easy_init();
    if (handle == nullptr) throw std::bad_alloc();
    return {this, handle};
  }

  // One attempt: a GET of `into.size()` bytes from `first`; `sizing`: of the first byte, for the
  // object's size (a GET rather than a HEAD, so that a refusal comes with its reason).
  // `to_end`: the object may end before `into` is full (a chunk at its end).
  detail::http_attempt attempt(const target& where, std::uint64_t first, std::span<std::byte> into,
                               bool sizing, bool to_end = false) const {
    const handle_lease leased = lease();
    CURL* const handle = leased.handle;
    requests.fetch_add(1, std::memory_order_relaxed);
    char error[CURL_ERROR_SIZE] = {};
    detail::http_sink sink{handle, into, first, 0, {}, {}, {}};
    const std::string range = crema::detail::format("{}-{}", first, first + into.size() - 1);
    curl_easy_setopt(handle, CURLOPT_URL, where.url.c_str());
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(handle, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(options.connect_timeout.count()));
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(options.request_timeout.count()));
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>(std::max<std::int64_t>(1, options.stall_timeout.count())));
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER,
                     where.sigv4 != nullptr ? signed_s3.list : plain.list);
    if (where.sigv4 != nullptr) {
      curl_easy_setopt(handle, CURLOPT_AWS_SIGV4, where.sigv4->c_str());
      curl_easy_setopt(handle, CURLOPT_USERPWD, credentials.c_str());
    }
    curl_easy_setopt(handle, CURLOPT_RANGE, range.c_str());
    if (!options.ca_file.empty()) curl_easy_setopt(handle, CURLOPT_CAINFO, options.ca_file.c_str());
    // Receive in large reads: a sample is tens or hundreds of KB, libcurl's default 16 KiB.
    curl_easy_setopt(handle, CURLOPT_BUFFERSIZE, detail::receive_buffer);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &detail::http_write);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, &detail::http_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &sink);

    detail::http_attempt made;
    made.code = curl_easy_perform(handle);
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &made.status);
    made.bytes = sink.written;
    if (!sizing) bytes_read.fetch_add(sink.written, std::memory_order_relaxed);
    if (!sink.fault.empty()) {
      made.failure = sink.fault;
      made.retryable = false;
      return made;
    }
    if (made.code != CURLE_OK) {
      made.failure = crema::detail::format(
          "libcurl: {}", error[0] != '\0' ? error : curl_easy_strerror(made.code));
      made.retryable = !detail::lasting_failure(made.code);
      return made;
    }
    if (sizing && made.status == 416 && sink.total) {  // an empty object: no first byte
      made.length = *sink.total;
      return made;
    }
    if (made.status != 200 && made.status != 206) {
      made.failure = crema::detail::format("HTTP {}", made.status);
      if (!sink.error_body.empty()) made.failure += ": " + sink.error_body;
      made.retryable = detail::retryable_status(made.status);
      return made;
    }
    if (sizing) {
      if (made.status == 200) {
        made.length = sink.written;  // the whole object, of one byte
      } else if (sink.total) {
        made.length = *sink.total;
      } else {
        made.failure =
            "the answer to a range request gives no size (Content-Range: bytes a-b/size)";
      }
      return made;
    }
    if (sink.written != into.size() &&
        !(to_end && sink.total && first + sink.written == *sink.total)) {
      made.failure =
          crema::detail::format("the answer ended {} bytes short", into.size() - sink.written);
      made.retryable = true;
    }
    return made;
  }

  // Makes `once()` an attempt, again after each failure another attempt may get past (the
  // backoff between), up to the retries; the attempt that succeeded.
  // @throws crema::io_error "shard URL: <what()> (at ...): <failure> (after N attempts)"
  template <class Once, class What>
  detail::http_attempt retried(const std::string& url, const target& where, Once&& once,
                               What&& what) const {
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0) {
        retries.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::sleep_for(backoff(attempt));
      }
      detail::http_attempt made = once();
      if (made.failure.empty()) return made;
      if (!made.retryable || attempt >= options.retries) {
        detail::fail_with_code<io_error>(
            detail::errno_of_status(made.status), "shard {}: {}{}: {}{}", url, what(),
            where.url == url ? std::string() : " (at " + where.url + ")", made.failure,
            attempt > 0 ? crema::detail::format(" (after {} attempts)", attempt + 1) : "");
      }
    }
  }

  // Reads into `into` from `offset` with retries, each going on from the byte the last reached:
  // the bytes read (fewer than asked only where `to_end` lets the object end first).
  std::size_t read_range(const std::string& url, const target& where, std::uint64_t offset,
                         std::span<std::byte> into, bool to_end) const {
    std::size_t done = 0;
    retried(
        url, where,
        [&] {
          detail::http_attempt made =
              attempt(where, offset + done, into.subspan(done), false, to_end);
          done += made.bytes;
          return made;
        },
        [&] {
          return crema::detail::format("cannot read {} bytes at byte {}", into.size() - done,
                                       offset + done);
        });
    return done;
  }

  // One chunk of an object in the cache: its bytes once fetched; until then, readers of it wait.
  struct chunk {
    std::shared_ptr<const std::vector<std::byte>> bytes;              // null while it is fetched
    std::list<std::pair<std::string, std::uint64_t>>::iterator used;  // its place by last use
  };

  // Chunk `number` of `url`, from the cache or fetched now (once, however many readers ask).
  std::shared_ptr<const std::vector<std::byte>> cached_chunk(const std::string& url,
                                                             const target& where,
                                                             std::uint64_t number) const {
    const std::pair<std::string, std::uint64_t> key{url, number};
    std::unique_lock lock(cache_mutex);
    for (;;) {
      const auto found = chunks.find(key);
      if (found == chunks.end()) break;
      if (found->second.bytes != nullptr) {
        recency.splice(recency.begin(), recency, found->second.used);
        return found->second.bytes;
      }
      chunk_ready.wait(lock);  // another reader fetches it; look again (it may have failed)
    }
    recency.push_front(key);
    chunks.emplace(key, chunk{nullptr, recency.begin()});
    std::shared_ptr<std::vector<std::byte>> bytes;
    if (!spare.empty()) {  // a dropped chunk's memory, its pages already mapped
      bytes = std::move(spare.back());
      spare.pop_back();
    }
    lock.unlock();
    try {
      if (bytes == nullptr) bytes = std::make_shared<std::vector<std::byte>>();
      bytes->resize(options.chunk_bytes);
      bytes->resize(read_range(url, where, number * options.chunk_bytes, *bytes, true));
    } catch (...) {
      lock.lock();
      const auto failed = chunks.find(key);
      recency.erase(failed->second.used);
      chunks.erase(failed);
      chunk_ready.notify_all();
      throw;
    }
    lock.lock();
    chunks.at(key).bytes = bytes;
    cached_bytes += bytes->size();
    // The least recently used fetched chunks out, while the cache holds more than it may.
    for (auto last = recency.end();
         cached_bytes > options.cache_bytes && last != recency.begin();) {
      --last;
      const auto old = chunks.find(*last);
      if (old->second.bytes == nullptr || old->second.bytes == bytes) continue;
      cached_bytes -= old->second.bytes->size();
      if (old->second.bytes.use_count() == 1 && spare.size() < most_spare) {  // no reader has it
        spare.push_back(std::const_pointer_cast<std::vector<std::byte>>(old->second.bytes));
      }
      chunks.erase(old);
      last = recency.erase(last);
    }
    chunk_ready.notify_all();
    return bytes;
  }

  // The wait before retry `retry` (1 for the first): the backoff doubled, capped, drawn between
  // half and the whole of it.
  [[nodiscard]] std::chrono::milliseconds backoff(int retry) const {
    auto wait = options.backoff;
    for (int i = 1; i < retry && wait < options.most_backoff; ++i) wait *= 2;
    wait = std::min(wait, options.most_backoff);
    thread_local std::minstd_rand draw(
        static_cast<std::uint32_t>(std::hash<std::thread::id>()(std::this_thread::get_id())));
    const auto half = wait.count() / 2;
    return std::chrono::milliseconds(
        half +
        (half > 0 ? static_cast<std::int64_t>(draw() % static_cast<std::uint32_t>(half + 1)) : 0));
  }

  http_options options;
  std::string credentials;  // "key:secret", empty where the environment has none
  std::string s3_sigv4;     // how s3:// requests are signed
  detail::curl_headers plain;
  detail::curl_headers signed_s3;
  mutable std::mutex mutex;
  mutable std::vector<CURL*> idle;
  mutable std::atomic<std::uint64_t> requests{0};
  mutable std::atomic<std::uint64_t> retries{0};
  mutable std::atomic<std::uint64_t> bytes_read{0};
  // The chunk cache (where options.cache_bytes is not 0).
  mutable std::mutex cache_mutex;
  mutable std::condition_variable chunk_ready;
  mutable std::map<std::pair<std::string, std::uint64_t>, chunk> chunks;
  mutable std::list<std::pair<std::string, std::uint64_t>> recency;  // most recently used first
  mutable std::size_t cached_bytes = 0;
  // Dropped chunks' memory, kept for the next fetches (fresh memory costs a page fault a page).
  static constexpr std::size_t most_spare = 2;
  mutable std::vector<std::shared_ptr<std::vector<std::byte>>> spare;
};

CREMA_LIBRARY_INLINE http_storage::http_storage(http_options options)
    : state_(std::make_unique<state>(std::move(options))) {}

CREMA_LIBRARY_INLINE http_storage::~http_storage() = default;

CREMA_LIBRARY_INLINE std::string http_storage::resolve(const std::string& url) const {
  return state_->target_of(url).url;
}

CREMA_LIBRARY_INLINE http_statistics http_storage::statistics() const noexcept {
  return {state_->requests.load(std::memory_order_relaxed),
          state_->retries.load(std::memory_order_relaxed),
          state_->bytes_read.load(std::memory_order_relaxed)};
}

CREMA_LIBRARY_INLINE std::uint64_t http_storage::size(const std::string& url) const {
  const state::target where = state_->target_of(url);
  std::byte first{};
  return state_
      ->retried(
          url, where,
          [&] {
            return state_->attempt(where, 0, {&first, 1}, true);
          },
          [] { return std::string("cannot ask its size"); })
      .length;
}

CREMA_LIBRARY_INLINE void http_storage::read(const std::string& url, std::uint64_t offset,
                                             std::span<std::byte> into) const {
  if (into.empty()) return;
  const state::target where = state_->target_of(url);
  if (state_->options.cache_bytes == 0) {
    (void)state_->read_range(url, where, offset, into, false);
    return;
  }
  const std::uint64_t chunk = state_->options.chunk_bytes;
  std::size_t done = 0;
  while (done < into.size()) {
    const std::uint64_t at = offset + done;
    const auto bytes = state_->cached_chunk(url, where, at / chunk);
    const std::uint64_t within = at % chunk;
    if (within >= bytes->size()) {
      detail::fail_with_code<io_error>(0, "shard {}: ends at byte {}, {} bytes short of byte {}",
                                       url, at - within + bytes->size(), into.size() - done,
                                       offset + into.size());
    }
    const std::size_t part =
        std::min<std::size_t>(into.size() - done, bytes->size() - static_cast<std::size_t>(within));
    std::copy_n(bytes->begin() + static_cast<std::ptrdiff_t>(within), part,
                into.begin() + static_cast<std::ptrdiff_t>(done));
    done += part;
  }
}

}  // namespace crema
