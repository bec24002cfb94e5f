#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/io/shards/shard_file.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

/// @file
/// Shards read over HTTP(S), and from S3 or a store that speaks its protocol, through libcurl:
/// `http_storage`, the `shard_storage` that the shard sources take for URLs. Each read is one
/// range request (`Range: bytes=a-b`) on a connection kept open for the next; a failed request is
/// retried with backoff; S3 requests are signed (AWS Signature Version 4) with the environment's
/// credentials. Component: crema::http (libcrema_http; Debian: libcurl4-openssl-dev).

namespace crema {

/// @brief How an `http_storage` asks.
struct http_options {
  /// Attempts after the first that a failed request gets. Retried: a connection refused, reset
  /// or timed out, a body cut short, and the answers 408, 429 and 5xx; not retried: the other
  /// 4xx answers (a missing object, a refused signature) and a server that ignores ranges.
  int retries = 5;
  /// The wait before the first retry, doubled before each next one up to `most_backoff`, each
  /// drawn between half and the whole of it (so that ranks that failed together spread out).
  std::chrono::milliseconds backoff{200};
  std::chrono::milliseconds most_backoff{10'000};
  /// How long a connection may take to open before the attempt fails.
  std::chrono::milliseconds connect_timeout{10'000};
  /// How long a request may take in all before the attempt fails; 0: no limit (a large read
  /// over a slow link is not cut), `stall_timeout` still catches a dead one.
  std::chrono::milliseconds request_timeout{0};
  /// How long a transfer may move no byte before the attempt fails (whole seconds, libcurl's).
  std::chrono::seconds stall_timeout{30};
  /// Sign `http://` and `https://` requests with AWS Signature Version 4 as libcurl's
  /// `CURLOPT_AWS_SIGV4` takes it (`aws:amz:<region>:<service>`, e.g. `aws:amz:us-east-1:s3`);
  /// empty: such URLs are not signed. `s3://` URLs are signed whenever credentials are found.
  std::string aws_sigv4;
  /// The endpoint `s3://bucket/key` is read from, as `<endpoint>/bucket/key` (a MinIO or Ceph
  /// store, or a test server); empty: `$AWS_ENDPOINT_URL_S3`, else `$AWS_ENDPOINT_URL`, else AWS
  /// itself, `https://bucket.s3.<region>.amazonaws.com/key`.
  std::string s3_endpoint;
  /// The region S3 requests are signed for; empty: `$AWS_REGION`, else `$AWS_DEFAULT_REGION`,
  /// else `us-east-1`.
  std::string region;
  /// Headers sent with every request, `Name: value` each.
  std::vector<std::string> headers;
  /// A file of PEM certificates that HTTPS servers are checked against instead of the system's
  /// (an internal store's own authority); empty: the system's. Servers are always verified.
  std::string ca_file;
  /// Bytes of shards kept in memory, in chunks of `chunk_bytes` read whole, the least recently
  /// used dropped first; 0: none kept, each read its own request. With a source shuffled shard
  /// by shard (`shuffle_shards`), a cache that holds a block of shards turns a request a sample
  /// into a request a chunk.
  std::size_t cache_bytes = 0;
  std::size_t chunk_bytes = std::size_t{8} << 20;
};

/// @brief What an `http_storage` has done since it was made.
struct http_statistics {
  std::uint64_t requests = 0;  ///< every attempt, retries included
  std::uint64_t retries = 0;   ///< attempts after a failed one
  std::uint64_t bytes = 0;     ///< the bytes of the shards read
};

/// @brief Shards behind `http://`, `https://` and `s3://` URLs, read by range requests through
/// libcurl; what `webdataset_source`, `tfrecord_source` and `shard_set` take to read URLs.
///
/// `size(url)` asks for the object's first byte (`Range: bytes=0-0`, whose answer's Content-Range
/// gives the size, and whose refusal, unlike a HEAD's, says why); `read(url, offset, bytes)` asks
/// with one `GET` of that range,
/// which must be answered `206 Partial Content` (or `200` with exactly the bytes asked, for a
/// read of a whole object). Connections are kept open between requests, one per reading thread.
/// A failed attempt is retried as `http_options` says, from the byte it reached; a read that
/// still fails is a `crema::io_error` naming the URL, the byte offset, the attempts and the last
/// failure (the HTTP status and the start of the answer's body, or libcurl's error). `s3://`
/// URLs are signed with `$AWS_ACCESS_KEY_ID` and `$AWS_SECRET_ACCESS_KEY` (and
/// `$AWS_SESSION_TOKEN`'s token) where the environment has them, as the AWS tools do; without
/// them, they are read unsigned (a public bucket). Thread-safe.
class http_storage final : public shard_storage {
 public:
  /// @throws crema::config_error if `options.aws_sigv4` is set and the environment has no
  ///         credentials, or for a header that is not `Name: value`
  CREMA_LIBRARY_INLINE explicit http_storage(http_options options = {});
  CREMA_LIBRARY_INLINE ~http_storage() override;

  /// @return the size of the object at `url`, from a request for its first byte
  /// @throws crema::io_error naming the URL if the request fails after its retries, is refused
  ///         (404: ENOENT; 401, 403: EACCES) or has no length; crema::config_error naming a URL
  ///         whose scheme is not http, https or s3
  [[nodiscard]] CREMA_LIBRARY_INLINE std::uint64_t size(const std::string& url) const override;
  /// @brief Reads `into.size()` bytes of the object at `url` from `offset`, all of them, with
  /// one range request (more where attempts fail part way).
  /// @throws crema::io_error naming the URL, the byte offset and the last failure if the read
  ///         fails after its retries or is refused
  CREMA_LIBRARY_INLINE void read(const std::string& url, std::uint64_t offset,
                                 std::span<std::byte> into) const override;

  /// @return the URL `url` is read from: itself, or an `s3://` URL's HTTPS (or endpoint) URL
  [[nodiscard]] CREMA_LIBRARY_INLINE std::string resolve(const std::string& url) const;
  /// @return the requests, retries and bytes so far
  [[nodiscard]] CREMA_LIBRARY_INLINE http_statistics statistics() const noexcept;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace crema

#if defined(CREMA_HEADER_ONLY)
#include <crema/io/http/detail/http_storage_impl.hpp>
#endif
