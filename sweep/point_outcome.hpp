#pragma once
/// What one sweep point came to: a row, or why it has none. Made by a worker, carried to
/// rank 0 (sweep/ranks.hpp) and consumed there in point order.
#include "common/error_codes.hpp"

#include <cstdint>
#include <string>

namespace lynx::sweep {

struct PointOutcome {
  enum class Kind : std::uint8_t {
    kRow,       ///< simulated; `text` is its row
    kValid,     ///< valid but not simulated (a resume check of a point with no row)
    kFiltered,  ///< a `where:` filter excludes it
    kSkipped,   ///< invalid scenario; `text` is the reason (the loader's message)
  };
  Kind kind = Kind::kRow;
  bool oom = false;  ///< a row whose plan does not fit in GPU memory
  std::string text;
  ErrorCode code = ErrorCode::kInternal;  ///< kSkipped: the code of the error in `text`
};

}  // namespace lynx::sweep
