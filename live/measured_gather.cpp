#include "live/measured_gather.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace lynx::live {

namespace {

/// Appends plain values to a byte buffer.
class Writer {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto at = bytes.size();
    bytes.resize(at + sizeof value);
    std::memcpy(bytes.data() + at, &value, sizeof value);
  }
  std::vector<std::uint8_t> bytes;
};

/// Reads them back; a short buffer is an internal error (both ends run the same op stream).
class Reader {
 public:
  explicit Reader(const std::vector<std::uint8_t>& bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    T value{};
    LYNX_CHECK(at_ + sizeof value <= bytes_.size(), "measurements end after {} of {} bytes", at_, bytes_.size());
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::vector<std::uint8_t>& bytes_;
  std::size_t at_ = 0;
};

/// Sizes `m` for every op and rank of `ops` (what is there stays).
void size_for(const OpStream& ops, Measured& m) {
  m.op_start_s.resize(ops.ops.size(), 0);
  m.op_end_s.resize(ops.ops.size(), 0);
  m.peak_bytes.resize(ops.gpu_names.size(), 0);
  m.memory_timeline.resize(ops.gpu_names.size());
}

}  // namespace

std::vector<std::uint8_t> pack_measured(const OpStream& ops, const Measured& m, const std::vector<int>& ranks) {
  LYNX_CHECK(m.op_start_seq.empty(), "sequence numbers are the host backend's (one process)");
  Writer w;
  w.put(m.iteration_s);
  w.put(static_cast<std::uint32_t>(ranks.size()));
  for (int r : ranks) {
    const auto rank = static_cast<std::size_t>(r);
    w.put(static_cast<std::int32_t>(r));
    for (int i : ops.rank_ops.at(rank)) {
      w.put(m.op_start_s.at(static_cast<std::size_t>(i)));
      w.put(m.op_end_s.at(static_cast<std::size_t>(i)));
    }
    w.put(m.peak_bytes.at(rank));
    const auto& timeline = m.memory_timeline.at(rank);
    w.put(static_cast<std::uint64_t>(timeline.size()));
    for (const auto& [at_s, bytes] : timeline) {
      w.put(at_s);
      w.put(bytes);
    }
  }
  return std::move(w.bytes);
}

void unpack_measured(const OpStream& ops, const std::vector<std::uint8_t>& bytes, Measured& into) {
  size_for(ops, into);
  Reader r(bytes);
  into.iteration_s = std::max(into.iteration_s, r.get<double>());
  const auto count = r.get<std::uint32_t>();
  for (std::uint32_t k = 0; k < count; ++k) {
    const auto rank = static_cast<std::size_t>(r.get<std::int32_t>());
    LYNX_CHECK(rank < ops.gpu_names.size(), "measurements of rank {} of {}", rank, ops.gpu_names.size());
    for (int i : ops.rank_ops[rank]) {
      into.op_start_s[static_cast<std::size_t>(i)] = r.get<double>();
      into.op_end_s[static_cast<std::size_t>(i)] = r.get<double>();
    }
    into.peak_bytes[rank] = r.get<std::int64_t>();
    auto& timeline = into.memory_timeline[rank];
    timeline.resize(r.get<std::uint64_t>());
    for (auto& [at_s, b] : timeline) {
      at_s = r.get<double>();
      b = r.get<std::int64_t>();
    }
  }
  LYNX_CHECK(r.done(), "{} bytes of measurements left over", bytes.size());
}

Measured gather_measured(IdExchange& exchange, const OpStream& ops, const BootstrapPlan& plan, Measured local,
                         double limit_s) {
  if (exchange.processes() == 1) return local;
  const std::vector<std::vector<std::uint8_t>> all =
      exchange.gather(pack_measured(ops, local, plan.process_ranks.at(static_cast<std::size_t>(exchange.process()))),
                      {limit_s, "the gathering of every rank's measurements on node 0 (--timeout-iteration)"});
  if (exchange.process() != 0) return local;
  Measured whole;
  for (const std::vector<std::uint8_t>& part : all) unpack_measured(ops, part, whole);
  return whole;
}

}  // namespace lynx::live
