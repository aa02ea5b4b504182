#pragma once
/// The measurements of a run over several processes, brought to process 0: each process
/// measures the ops of its own ranks (op times, peak, memory timeline); process 0 gets all of
/// them in one Measured, exactly as one process measuring every rank would have filled it.
#include "live/backend.hpp"
#include "live/id_exchange.hpp"

#include <cstdint>
#include <vector>

namespace lynx::live {

/// The part of `m` that belongs to `ranks` (their ops' start and end times, peaks, timelines)
/// as bytes.
std::vector<std::uint8_t> pack_measured(const OpStream& ops, const Measured& m, const std::vector<int>& ranks);

/// Writes what pack_measured packed into `into` (sized for every rank and op); the iteration
/// time becomes the larger of the two.
void unpack_measured(const OpStream& ops, const std::vector<std::uint8_t>& bytes, Measured& into);

/// Gathers every process's ranks of `local` (which this process filled for
/// plan.process_ranks[exchange.process()]) on process 0, which returns the whole run's
/// Measured; the others return `local` unchanged. Collective, waiting at most `limit_s`.
Measured gather_measured(IdExchange& exchange, const OpStream& ops, const BootstrapPlan& plan, Measured local,
                         double limit_s);

}  // namespace lynx::live
