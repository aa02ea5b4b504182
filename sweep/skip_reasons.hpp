#pragma once
/// Why sweep points (or `best` candidates) were skipped, counted per error code and reason:
/// messages that differ only in positions, numbers and advice count as one reason.
#include "common/error_codes.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lynx::sweep {

/// One reason points were skipped for.
struct SkipReason {
  ErrorCode code = ErrorCode::kInternal;  ///< of the lynx::Error that skipped the points
  std::string reason;  ///< skip_reason() of the loader's message
  std::uint64_t count = 0;
  std::uint64_t first_point = 0;
  std::string first_message;  ///< the first such point's whole message
  std::string first_values;   ///< the first such point's axis values ("parallel.tp=2 ...")
};

/// The skip reasons of one sweep or search, as points are counted in point order.
class SkipReasons {
 public:
  /// Counts point `point`, skipped by an error `code` with `message`; `values` (the point's
  /// axis values) is asked for only on a reason's first point.
  void add(ErrorCode code, const std::string& message, std::uint64_t point,
           const std::function<std::string()>& values);
  /// The reasons, most points first, then by first point.
  std::vector<SkipReason> sorted() const;

 private:
  std::map<std::pair<ErrorCode, std::string>, SkipReason> reasons_;
};

/// The reason in a loader or layout message, for counting: without the file position and
/// override, the advice after the key's message, and the numbers ("key 'parallel.pp':
/// model.layers is not divisible by parallel.pp × parallel.virtual_stages").
std::string skip_reason(const std::string& message);

/// "CODE reason" of a skip reason, as summaries print it ("E301 key 'parallel.pp': ...").
std::string skip_reason_text(const SkipReason& reason);

}  // namespace lynx::sweep
