// libFuzzer target: the MPI reducer's decoders of what other ranks send (views to rank 0, rank
// 0's verdicts to the others, failure notices to all). The first byte chooses the communicator's
// size (1 to 256), the second which decoder; the rest is the message. A message is accepted
// exactly when it is one (a view: its size; a verdict: its size, a known kind, and for anything
// but agreement another rank of the communicator; a notice: its size and a rank of the
// communicator), accepted bytes decode to themselves, and a refusal says why. Anything
// else (a crash, a sanitizer report, an exception, a wrong acceptance, which traps) is a finding.

#include <crema/collective/mpi/detail/reducer_wire.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <variant>

namespace wire = crema::mpi::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t ranks = 1 + std::size_t{data[0]};
  const std::span<const std::byte> message(reinterpret_cast<const std::byte*>(data + 2), size - 2);
  if (data[1] % 3 == 2) {
    const auto notice = wire::decode_failure(message, ranks);
    if (const auto* decoded = std::get_if<wire::failure_notice>(&notice)) {
      if (message.size() != sizeof *decoded || decoded->rank >= ranks) __builtin_trap();
      if (std::memcmp(decoded, message.data(), sizeof *decoded) != 0) __builtin_trap();
    } else if (std::get<std::string>(notice).empty()) {
      __builtin_trap();
    }
    return 0;
  }
  if (data[1] % 3 == 0) {
    const auto view = wire::decode_view(message);
    if (const auto* decoded = std::get_if<wire::reducer_view>(&view)) {
      if (message.size() != sizeof *decoded) __builtin_trap();
      if (std::memcmp(decoded, message.data(), sizeof *decoded) != 0) __builtin_trap();
    } else if (message.size() == sizeof(wire::reducer_view) || std::get<std::string>(view).empty()) {
      __builtin_trap();
    }
    return 0;
  }
  const auto verdict = wire::decode_verdict(message, ranks);
  if (const auto* decoded = std::get_if<wire::reducer_verdict>(&verdict)) {
    if (message.size() != sizeof *decoded) __builtin_trap();
    const auto kind = static_cast<std::uint64_t>(decoded->kind);
    if (kind > static_cast<std::uint64_t>(wire::verdict_kind::malformed)) __builtin_trap();
    if (decoded->kind != wire::verdict_kind::agreed &&
        (decoded->rank == 0 || decoded->rank >= ranks)) {
      __builtin_trap();
    }
    if (std::memcmp(decoded, message.data(), sizeof *decoded) != 0) __builtin_trap();
  } else if (std::get<std::string>(verdict).empty()) {
    __builtin_trap();
  }
  return 0;
}
