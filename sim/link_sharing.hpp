#pragma once
/// How a link's bandwidth is divided among concurrent flows. The executor asks the policy for
/// new rates whenever flows join or leave links; a max-min policy could replace the default.
#include "sim/link_network.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace lynx::sim {

/// A flow's rate as an exact rational: bytes_per_s_num / den bytes per second.
struct FlowRate {
  std::uint64_t bytes_per_s_num = 0;  ///< 0: no rate assigned yet
  std::uint64_t den = 1;
  friend bool operator==(const FlowRate&, const FlowRate&) = default;
};

/// A new rate for an active flow.
struct RateChange {
  std::uint32_t handle = 0;
  FlowRate rate;
};

/// The one interface every sharing policy implements.
class SharingPolicy {
 public:
  virtual ~SharingPolicy() = default;
  /// Flows joined or left `touched_links` (each listed once); appends to `changes` the current
  /// rate of every active flow whose rate may have changed (flows just added included).
  virtual void reshare(const LinkNetwork& network, std::span<const LinkId> touched_links,
                       std::vector<RateChange>& changes) = 0;
};

/// Bottleneck fair share: each link splits its bandwidth equally among its flows, and a flow
/// runs at the smallest share along its path: min over links l of bw_l / n_l. Bandwidth a flow
/// cannot use on its other links is not redistributed (max-min would).
class BottleneckFairShare final : public SharingPolicy {
 public:
  void reshare(const LinkNetwork& network, std::span<const LinkId> touched_links,
               std::vector<RateChange>& changes) override;
  /// The rate of active flow `handle` under this policy.
  static FlowRate rate_of(const LinkNetwork& network, std::uint32_t handle);

 private:
  std::vector<std::uint32_t> seen_stamp_;  ///< per handle: last reshare that listed it
  std::uint32_t stamp_ = 0;
};

/// True when rate a < rate b (exact, cross-multiplied in 128 bits).
inline bool slower(const FlowRate& a, const FlowRate& b) {
  return static_cast<UInt128>(a.bytes_per_s_num) * b.den <
         static_cast<UInt128>(b.bytes_per_s_num) * a.den;
}

}  // namespace lynx::sim
