// lynx-opt / checkmate with COIN-OR CBC (C interface, CBC 2.10). Outline: validate; keep per
// layer only Pareto-optimal options; answer exactly without CBC when nothing fits or when every
// layer's fastest option fits; else a fast CBC pass (with preprocessing) finds an incumbent and
// an exact CBC pass (without preprocessing, cutoff at the incumbent) proves it optimal or finds
// the optimum. Every plan is re-evaluated in integer bytes and picoseconds with evaluate().
#include "strategies/milp_planner.hpp"

#include "common/clock.hpp"

#include "common/error.hpp"
#include "common/worker_processes.hpp"

#include <coin/Cbc_C_Interface.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace lynx::strategies {
namespace {


/// Options each layer may pick (indices into its StageProblem::options_of), per layer.
using Candidates = std::vector<std::vector<int>>;

/// Owns one CBC model; deleted on every exit path, exceptions included.
class CbcModelHandle {
 public:
  CbcModelHandle() : model_(Cbc_newModel()) {
    if (model_ == nullptr) fail(ErrorCode::kSystemFailure, "milp planner: CBC could not create a model");
  }
  ~CbcModelHandle() { Cbc_deleteModel(model_); }
  CbcModelHandle(const CbcModelHandle&) = delete;
  CbcModelHandle& operator=(const CbcModelHandle&) = delete;
  Cbc_Model* get() const { return model_; }

 private:
  Cbc_Model* model_;
};

/// What CBC returned for one pass: its status, and the solution (empty when it found none).
struct CbcResult {
  int status = -1;                ///< Cbc_status
  int secondary_status = -1;      ///< Cbc_secondaryStatus
  bool stopped_on_limit = false;  ///< the node limit stopped it
  bool complete = false;          ///< the search finished (not stopped by a limit or abandoned)
  double bound_ns = 0;            ///< CBC's best lower bound
  std::vector<double> solution;   ///< every column's value
};

/// What one CBC run produced, with its solution rounded to one option per layer.
struct SolverRun {
  CbcResult cbc;
  std::vector<int> assignment;  ///< rounded best integer solution; empty when CBC found none
};

// Exposed time enters the LP in nanoseconds: sums stay far below 2^53 and a difference of one
// picosecond (1e-3 ns) is still well above CBC's cutoff increment and gap tolerances, so the
// search separates assignments that differ by 1 ps (the tests compare against brute force).
double to_ns(TimePs ps) { return static_cast<double>(ps) * 1e-3; }

void validate(const StageProblem& p, const MilpOptions& options) {
  if (p.layers < 1) fail(ErrorCode::kInternal, "milp planner: stage {} has {} layers (need >= 1)", p.stage, p.layers);
  if (p.option_sets.empty() ||
      std::any_of(p.option_sets.begin(), p.option_sets.end(), [](const auto& set) { return set.empty(); }))
    fail(ErrorCode::kInternal, "milp planner: stage {} has a kind of layer without options", p.stage);
  if (!p.set_of_layer.empty() && p.set_of_layer.size() != static_cast<size_t>(p.layers))
    fail(ErrorCode::kInternal, "milp planner: stage {} has {} option sets of layers for {} layers", p.stage,
         p.set_of_layer.size(), p.layers);
  for (int set : p.set_of_layer)
    if (set < 0 || static_cast<size_t>(set) >= p.option_sets.size())
      fail(ErrorCode::kInternal, "milp planner: stage {} names option set {} of {}", p.stage, set,
           p.option_sets.size());
  if (p.window_ps.size() != static_cast<size_t>(p.layers))
    fail(ErrorCode::kInternal, "milp planner: stage {} has {} windows for {} layers", p.stage, p.window_ps.size(),
         p.layers);
  if (p.in_flight < 1)
    fail(ErrorCode::kInternal, "milp planner: stage {} has in_flight = {} (need >= 1)", p.stage, p.in_flight);
  for (const std::vector<LayerOption>& set : p.option_sets)
    for (size_t i = 0; i < set.size(); ++i) {
      const LayerOption& o = set[i];
      if (o.kept_bytes < 0 || o.transient_bytes < 0 || o.recompute_ps < 0 || o.overlapped_ps < 0)
        fail(ErrorCode::kInternal, "milp planner: option {} ('{}') has a negative size or time", i, o.label);
    }
  for (size_t l = 0; l < p.window_ps.size(); ++l)
    if (p.window_ps[l] < 0) fail(ErrorCode::kInternal, "milp planner: layer {} has a negative window", l);
  if (options.node_limit < 1)
    fail(ErrorCode::kOutOfRange, "milp planner: node limit {} is not a positive number", options.node_limit);
}

/// Per layer, the allowed options that no other allowed option beats or ties in all of
/// (exposed, kept, transient, recompute work): dropping them loses no optimum and shrinks the
/// MILP.
Candidates pareto_candidates(const StageProblem& p, bool allow_overlap) {
  std::vector<std::vector<int>> allowed_of_set;
  for (const std::vector<LayerOption>& set : p.option_sets) {
    std::vector<int>& allowed = allowed_of_set.emplace_back();
    for (size_t i = 0; i < set.size(); ++i)
      if (allow_overlap || !set[i].overlapped) allowed.push_back(static_cast<int>(i));
    if (allowed.empty())
      fail(ErrorCode::kInternal, "milp planner: stage {} has no on-demand option (checkmate needs one)", p.stage);
  }

  Candidates candidates(static_cast<size_t>(p.layers));
  for (int l = 0; l < p.layers; ++l) {
    const std::vector<int>& allowed = allowed_of_set[static_cast<size_t>(p.set_of(l))];
    auto key = [&](int o) {
      const LayerOption& opt = p.option(l, o);
      return std::make_tuple(exposed_ps(p, l, opt), opt.kept_bytes, opt.transient_bytes, recompute_work_ps(opt));
    };
    for (int o : allowed) {
      const auto own = key(o);
      const bool dominated = std::any_of(allowed.begin(), allowed.end(), [&](int other) {
        if (other == o) return false;
        const auto [e, k, t, w] = own;  // bound here: clang 14 cannot capture structured bindings
        const auto [e2, k2, t2, w2] = key(other);
        if (e2 > e || k2 > k || t2 > t || w2 > w) return false;
        const bool equal = e2 == e && k2 == k && t2 == t && w2 == w;
        return !equal || other < o;  // of identical options keep the lowest index
      });
      if (!dominated) candidates[static_cast<size_t>(l)].push_back(o);
    }
  }
  return candidates;
}

/// Every layer's fastest option (of equally fast ones the least recompute work, then the fewest
/// bytes), memory ignored: when it fits, it is optimal.
std::vector<int> fastest_assignment(const StageProblem& p, const Candidates& candidates) {
  std::vector<int> choice;
  for (int l = 0; l < p.layers; ++l) {
    const auto& cands = candidates[static_cast<size_t>(l)];
    choice.push_back(*std::min_element(cands.begin(), cands.end(), [&](int a, int b) {
      const LayerOption& oa = p.option(l, a);
      const LayerOption& ob = p.option(l, b);
      return std::make_tuple(exposed_ps(p, l, oa), recompute_work_ps(oa), oa.kept_bytes, oa.transient_bytes) <
             std::make_tuple(exposed_ps(p, l, ob), recompute_work_ps(ob), ob.kept_bytes, ob.transient_bytes);
    }));
  }
  return choice;
}

/// `s` with, layer by layer, each choice replaced by the candidate of least recompute work
/// whose exposed time is no larger and with which the stage still fits: the objective never
/// grows, and recompute the window model prices at 0 (it still contends for SMs with the
/// kernels and collectives beside it) is left out where memory allows, as lynx-heu's
/// (time, work, memory) order does. Greedy, so the least-work plan among the optima is not
/// guaranteed; the objective's optimality is kept.
StageSolution with_least_work(const StageProblem& p, const Candidates& candidates, StageSolution s) {
  std::vector<int> choice = s.option_of_layer;
  for (int l = 0; l < p.layers; ++l) {
    const int current = choice[static_cast<size_t>(l)];
    const LayerOption& cur = p.option(l, current);
    int pick = current;
    for (int o : candidates[static_cast<size_t>(l)]) {
      const LayerOption& opt = p.option(l, o);
      const LayerOption& best = p.option(l, pick);
      if (exposed_ps(p, l, opt) > exposed_ps(p, l, cur) || recompute_work_ps(opt) >= recompute_work_ps(best)) continue;
      choice[static_cast<size_t>(l)] = o;
      if (activation_bytes(p, choice) <= p.budget_bytes) pick = o;
    }
    choice[static_cast<size_t>(l)] = pick;
  }
  if (choice == s.option_of_layer) return s;
  StageSolution out = evaluate(p, choice);
  LYNX_CHECK(out.feasible && out.exposed_ps <= s.exposed_ps, "least-work pass made stage {} worse", p.stage);
  return out;
}

/// The assignment with the least activation memory (ties: least exposed time), found exactly:
/// for each cap on the largest transient, every layer takes its fewest kept bytes under the cap.
std::vector<int> least_memory_assignment(const StageProblem& p, const Candidates& candidates) {
  std::vector<std::int64_t> caps;
  for (int l = 0; l < p.layers; ++l)
    for (int o : candidates[static_cast<size_t>(l)]) caps.push_back(p.option(l, o).transient_bytes);
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());

  std::vector<int> best;
  std::int64_t best_bytes = 0;
  TimePs best_exposed = 0;
  for (std::int64_t cap : caps) {
    std::vector<int> choice;
    for (int l = 0; l < p.layers; ++l) {
      int pick = -1;
      for (int o : candidates[static_cast<size_t>(l)]) {
        const LayerOption& opt = p.option(l, o);
        if (opt.transient_bytes > cap) continue;
        if (pick < 0) {
          pick = o;
          continue;
        }
        const LayerOption& cur = p.option(l, pick);
        if (std::make_pair(opt.kept_bytes, exposed_ps(p, l, opt)) <
            std::make_pair(cur.kept_bytes, exposed_ps(p, l, cur)))
          pick = o;
      }
      if (pick < 0) break;  // some layer has nothing under this cap
      choice.push_back(pick);
    }
    if (choice.size() != static_cast<size_t>(p.layers)) continue;
    const StageSolution s = evaluate(p, choice);
    if (best.empty() || s.activation_bytes < best_bytes ||
        (s.activation_bytes == best_bytes && s.exposed_ps < best_exposed)) {
      best = choice;
      best_bytes = s.activation_bytes;
      best_exposed = s.exposed_ps;
    }
  }
  LYNX_CHECK(!best.empty(), "no assignment under any transient cap for stage {}", p.stage);
  return best;
}

/// Trivially copyable values and vectors of them as bytes: the messages between the planner and
/// its solver processes (the same binary on the same machine, so no byte order to agree on).
class Wire {
 public:
  Wire() = default;
  explicit Wire(const std::string& bytes) : bytes_(bytes.begin(), bytes.end()) {}
  std::string bytes() const { return {bytes_.begin(), bytes_.end()}; }
  bool at_end() const { return at_ == bytes_.size(); }

  template <typename T>
  void put(const T& value) {
    append(&value, sizeof value);
  }
  template <typename T>
  void put_vector(const std::vector<T>& values) {
    put(static_cast<std::uint64_t>(values.size()));
    append(values.data(), values.size() * sizeof(T));
  }
  template <typename T>
  bool get(T& value) {
    if (bytes_.size() - at_ < sizeof value) return false;
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return true;
  }
  template <typename T>
  bool get_vector(std::vector<T>& values) {
    std::uint64_t n = 0;
    if (!get(n) || n > (bytes_.size() - at_) / sizeof(T)) return false;
    values.resize(n);
    if (n > 0) std::memcpy(values.data(), bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return true;
  }

 private:
  void append(const void* data, std::size_t size) {
    const std::size_t end = bytes_.size();
    bytes_.resize(end + size);
    if (size > 0) std::memcpy(bytes_.data() + end, data, size);
  }

  std::vector<char> bytes_;
  std::size_t at_ = 0;
};

/// A MILP assembled row by row, then handed to CBC in compressed sparse columns.
class MilpBuilder {
 public:
  /// Adds a column; returns its index.
  int add_column(double lower, double upper, double objective, bool integer) {
    column_lower_.push_back(lower);
    column_upper_.push_back(upper);
    objective_.push_back(objective);
    integer_.push_back(integer ? 1 : 0);
    return static_cast<int>(objective_.size()) - 1;
  }
  /// Adds lower ≤ Σ coefficient·x[column] ≤ upper.
  void add_row(double lower, const std::vector<std::pair<int, double>>& terms, double upper) {
    const int row = static_cast<int>(row_lower_.size());
    row_lower_.push_back(lower);
    row_upper_.push_back(upper);
    for (const auto& [column, coefficient] : terms)
      if (coefficient != 0.0) entries_.push_back({column, row, coefficient});
  }
  int columns() const { return static_cast<int>(objective_.size()); }

  /// The model as bytes (for a worker process) and back.
  void write(Wire& wire) const {
    wire.put_vector(column_lower_);
    wire.put_vector(column_upper_);
    wire.put_vector(objective_);
    wire.put_vector(integer_);
    wire.put_vector(row_lower_);
    wire.put_vector(row_upper_);
    wire.put_vector(entries_);
  }
  bool read(Wire& wire) {
    return wire.get_vector(column_lower_) && wire.get_vector(column_upper_) && wire.get_vector(objective_) &&
           wire.get_vector(integer_) && wire.get_vector(row_lower_) && wire.get_vector(row_upper_) &&
           wire.get_vector(entries_);
  }

  void load_into(Cbc_Model* model) {
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return std::tie(a.column, a.row) < std::tie(b.column, b.row);
    });
    std::vector<CoinBigIndex> column_start;
    std::vector<int> row_index;
    std::vector<double> value;
    size_t next = 0;
    for (int c = 0; c < columns(); ++c) {
      column_start.push_back(static_cast<CoinBigIndex>(row_index.size()));
      for (; next < entries_.size() && entries_[next].column == c; ++next) {
        row_index.push_back(entries_[next].row);
        value.push_back(entries_[next].coefficient);
      }
    }
    column_start.push_back(static_cast<CoinBigIndex>(row_index.size()));
    Cbc_loadProblem(model, columns(), static_cast<int>(row_lower_.size()), column_start.data(),
                    row_index.data(), value.data(), column_lower_.data(), column_upper_.data(),
                    objective_.data(), row_lower_.data(), row_upper_.data());
    for (int c = 0; c < columns(); ++c)
      if (integer_[static_cast<size_t>(c)]) Cbc_setInteger(model, c);
  }

 private:
  struct Entry {
    int column;
    int row;
    double coefficient;
  };
  std::vector<double> column_lower_, column_upper_, objective_, row_lower_, row_upper_;
  std::vector<char> integer_;
  std::vector<Entry> entries_;
};

/// For every layer, the closest earlier layer identical to it (same option set and candidates,
/// same exposed times; e.g. the inner layers of a stage), or −1.
std::vector<int> previous_twin(const StageProblem& p, const Candidates& candidates) {
  auto identical = [&](int a, int b) {
    const auto& ca = candidates[static_cast<size_t>(a)];
    if (p.set_of(a) != p.set_of(b) || ca != candidates[static_cast<size_t>(b)]) return false;
    return std::all_of(ca.begin(), ca.end(), [&](int o) {
      const LayerOption& opt = p.option(a, o);
      return exposed_ps(p, a, opt) == exposed_ps(p, b, opt);
    });
  };
  std::vector<int> twin(static_cast<size_t>(p.layers), -1);
  for (int l = 1; l < p.layers; ++l)
    for (int previous = l - 1; previous >= 0; --previous)
      if (identical(previous, l)) {
        twin[static_cast<size_t>(l)] = previous;
        break;
      }
  return twin;
}

/// How one CBC run is set up.
struct CbcPass {
  /// CBC's preprocessing (CglPreProcess). Fast, but in CBC 2.10.8 it is not exact on this model:
  /// on fuzzed problems it fixed binaries of the true optimum to 0 (at the exact budget boundary
  /// and, more rarely, inside it), so its results are only used as an incumbent.
  bool preprocess = true;
  double cutoff_ns = std::numeric_limits<double>::infinity();  ///< only look below this
  int node_limit = MilpOptions::kDefaultNodeLimit;              ///< CBC's maxNodes
};

/// One CBC pass over `milp`, in this process.
CbcResult solve_with_cbc(MilpBuilder& milp, const CbcPass& pass) {
  CbcModelHandle handle;
  Cbc_Model* model = handle.get();
  milp.load_into(model);
  Cbc_setLogLevel(model, 0);
  // A node budget, never a time limit: the result must not depend on the machine's speed.
  Cbc_setMaximumNodes(model, pass.node_limit);
  // Stop only when the search is complete (no relative gap, a tiny absolute one), and let
  // solutions 1 ps apart count as different (1 ps = 1e-3 ns).
  Cbc_setParameter(model, "ratioGap", "0");
  Cbc_setParameter(model, "allowableGap", "1e-9");
  Cbc_setParameter(model, "increment", "1e-6");
  // Cut rounds cost more than they save here (measured on 72 GPT-like stage problems,
  // 24–96 layers × 32 options: total solve time 99 s with cuts, 65 s without).
  Cbc_setParameter(model, "cuts", "off");
  if (!pass.preprocess) Cbc_setParameter(model, "preprocess", "off");
  if (std::isfinite(pass.cutoff_ns))
    Cbc_setParameter(model, "cutoff", fmt::format("{}", pass.cutoff_ns).c_str());

  Cbc_solve(model);

  CbcResult r;
  r.status = Cbc_status(model);
  r.secondary_status = Cbc_secondaryStatus(model);
  r.stopped_on_limit = Cbc_isNodeLimitReached(model) != 0 || r.secondary_status == 3;
  r.complete = r.status == 0 && !r.stopped_on_limit && Cbc_isAbandoned(model) == 0;
  r.bound_ns = Cbc_getBestPossibleObjValue(model);
  if (const double* solution = Cbc_bestSolution(model)) r.solution.assign(solution, solution + milp.columns());
  return r;
}

std::string encode_pass(const MilpBuilder& milp, const CbcPass& pass) {
  Wire wire;
  milp.write(wire);
  wire.put(static_cast<char>(pass.preprocess ? 1 : 0));
  wire.put(pass.cutoff_ns);
  wire.put(pass.node_limit);
  return wire.bytes();
}

std::string encode_result(const CbcResult& r) {
  Wire wire;
  wire.put(r.status);
  wire.put(r.secondary_status);
  wire.put(r.stopped_on_limit);
  wire.put(r.complete);
  wire.put(r.bound_ns);
  wire.put_vector(r.solution);
  return wire.bytes();
}

std::optional<CbcResult> decode_result(const std::string& bytes) {
  Wire wire(bytes);
  CbcResult r;
  if (!wire.get(r.status) || !wire.get(r.secondary_status) || !wire.get(r.stopped_on_limit) ||
      !wire.get(r.complete) || !wire.get(r.bound_ns) || !wire.get_vector(r.solution) || !wire.at_end())
    return std::nullopt;
  return r;
}

/// A solver process's handler: a pass's bytes in, its result's bytes out.
std::string solve_encoded_pass(const std::string& request) {
  Wire wire(request);
  MilpBuilder milp;
  CbcPass pass;
  char preprocess = 0;
  if (!milp.read(wire) || !wire.get(preprocess) || !wire.get(pass.cutoff_ns) || !wire.get(pass.node_limit) ||
      !wire.at_end())
    fail(ErrorCode::kInternal, "milp planner: a malformed request reached a solver process");
  pass.preprocess = preprocess != 0;
  return encode_result(solve_with_cbc(milp, pass));
}

/// The solver processes of the live ParallelMilpSolves, if any.
std::atomic<WorkerProcesses*> solver_processes{nullptr};

/// One CBC pass. CBC's solve driver is not reentrant (coin-or/Cbc issue #332, "CbcMain not
/// thread safe"): with solver processes (ParallelMilpSolves) the pass runs in an idle one, so
/// that threads solve at once; else in this process, one solve at a time.
CbcResult solve_milp(MilpBuilder& milp, const CbcPass& pass) {
  if (WorkerProcesses* workers = solver_processes.load())
    if (const std::optional<std::string> reply = workers->call(encode_pass(milp, pass)))
      if (std::optional<CbcResult> result = decode_result(*reply)) return *std::move(result);
  static std::mutex cbc_mutex;
  const std::lock_guard lock(cbc_mutex);
  return solve_with_cbc(milp, pass);
}

/// Builds and solves the MILP:
///   y[l][k] ∈ {0,1}, Σ_k y[l][k] = 1                       (one candidate per layer)
///   Σ_k transient(k)·y[l][k] − T ≤ 0                        (T ≥ every layer's transient)
///   in_flight·Σ_l Σ_k kept(k)·y[l][k] + T ≤ budget          (memory)
///   Σ_l y[l][k(a_l)] ≤ layers − 1  for each assignment a in `excluded` (no-good rows)
///   minimise Σ exposed(l,k)·y[l][k]
/// Bytes are divided by the largest coefficient so the matrix entries lie in [0, 1].
/// Identical layers (the stage's inner layers are all alike) let the search wander through
/// every permutation of one plan, so along each class of identical layers the chosen candidate
/// position may not decrease: for layer l and its previous twin t,
///   Σ_k k·y[t][k] − Σ_k k·y[l][k] ≤ 0.
/// Measured on this machine: without these rows 24-layer checkmate problems stopped at a
/// 10 s limit with 1–4% gap; with them 96 layers × 32 options solve in seconds.
SolverRun run_cbc(const StageProblem& p, const Candidates& candidates,
                  const std::vector<std::vector<int>>& excluded, const CbcPass& pass) {
  const int layers = p.layers;
  double max_bytes = 1;
  std::int64_t max_transient = 0;
  for (int l = 0; l < layers; ++l)
    for (int o : candidates[static_cast<size_t>(l)]) {
      const LayerOption& opt = p.option(l, o);
      max_bytes = std::max({max_bytes,
                            static_cast<double>(p.in_flight) * static_cast<double>(opt.kept_bytes),
                            static_cast<double>(opt.transient_bytes)});
      max_transient = std::max(max_transient, opt.transient_bytes);
    }
  auto scaled = [&](std::int64_t bytes) { return static_cast<double>(bytes) / max_bytes; };
  const double infinity = std::numeric_limits<double>::max();

  MilpBuilder milp;
  std::vector<int> first_column;  // column of y[l][0]
  for (int l = 0; l < layers; ++l) {
    first_column.push_back(milp.columns());
    for (int o : candidates[static_cast<size_t>(l)])
      milp.add_column(0.0, 1.0, to_ns(exposed_ps(p, l, p.option(l, o))), true);
  }
  const int transient_column = milp.add_column(0.0, scaled(max_transient), 0.0, false);
  auto y = [&](int l, size_t k) {
    return first_column[static_cast<size_t>(l)] + static_cast<int>(k);
  };

  std::vector<std::pair<int, double>> memory{{transient_column, 1.0}};
  for (int l = 0; l < layers; ++l) {
    const auto& cands = candidates[static_cast<size_t>(l)];
    std::vector<std::pair<int, double>> one_choice, transient{{transient_column, -1.0}};
    for (size_t k = 0; k < cands.size(); ++k) {
      const LayerOption& opt = p.option(l, cands[k]);
      one_choice.emplace_back(y(l, k), 1.0);
      transient.emplace_back(y(l, k), scaled(opt.transient_bytes));
      memory.emplace_back(y(l, k), static_cast<double>(p.in_flight) * scaled(opt.kept_bytes));
    }
    milp.add_row(1.0, one_choice, 1.0);
    milp.add_row(-infinity, transient, 0.0);
  }
  milp.add_row(-infinity, memory, scaled(p.budget_bytes));

  for (const std::vector<int>& assignment : excluded) {
    std::vector<std::pair<int, double>> no_good;
    for (int l = 0; l < layers; ++l) {
      const auto& cands = candidates[static_cast<size_t>(l)];
      const auto k = std::find(cands.begin(), cands.end(), assignment[static_cast<size_t>(l)]);
      LYNX_CHECK(k != cands.end(), "excluded option is not a candidate of layer {}", l);
      no_good.emplace_back(y(l, static_cast<size_t>(k - cands.begin())), 1.0);
    }
    milp.add_row(-infinity, no_good, static_cast<double>(layers - 1));
  }

  const std::vector<int> twin = previous_twin(p, candidates);
  for (int l = 0; l < layers; ++l) {
    const int t = twin[static_cast<size_t>(l)];
    if (t < 0) continue;
    std::vector<std::pair<int, double>> order;
    for (size_t k = 1; k < candidates[static_cast<size_t>(l)].size(); ++k) {
      order.emplace_back(y(t, k), static_cast<double>(k));
      order.emplace_back(y(l, k), -static_cast<double>(k));
    }
    milp.add_row(-infinity, order, 0.0);
  }

  SolverRun run;
  run.cbc = solve_milp(milp, pass);
  if (run.cbc.solution.empty()) return run;
  // Round: each layer takes its largest binary (never trust the LP's values beyond that).
  for (int l = 0; l < layers; ++l) {
    const auto& cands = candidates[static_cast<size_t>(l)];
    const double* values = run.cbc.solution.data() + first_column[static_cast<size_t>(l)];
    const auto best = std::max_element(values, values + cands.size()) - values;
    run.assignment.push_back(cands[static_cast<size_t>(best)]);
  }
  return run;
}

}  // namespace

ParallelMilpSolves::ParallelMilpSolves(int threads) {
  if (threads < 2 || solver_processes.load() != nullptr) return;
  workers_ = std::make_unique<WorkerProcesses>(threads, solve_encoded_pass);
  if (workers_->size() > 0) solver_processes.store(workers_.get());
}

int ParallelMilpSolves::processes() const { return workers_ ? workers_->size() : 0; }

ParallelMilpSolves::~ParallelMilpSolves() {
  if (workers_ && solver_processes.load() == workers_.get()) solver_processes.store(nullptr);
}

StageSolution solve_stage_milp(const StageProblem& problem, const MilpOptions& options) {
  const WallClock::time_point start = WallClock::now();
  validate(problem, options);
  const Candidates candidates = pareto_candidates(problem, options.allow_overlap);

  auto finish = [&](StageSolution s, double gap, std::string status, bool limit_bound = false) {
    s.gap = gap;
    s.limit_bound = limit_bound;
    s.status = std::move(status);
    // A positive duration even when the clock's resolution is coarser than the work done.
    s.solve_seconds = std::max(seconds_since(start), std::numeric_limits<double>::min());
    return s;
  };

  // Exact shortcuts: nothing fits; or every layer's fastest option fits (then it is optimal).
  StageSolution best = evaluate(problem, least_memory_assignment(problem, candidates));
  if (!best.feasible) return finish(best, 0.0, "infeasible");
  const StageSolution fastest = evaluate(problem, fastest_assignment(problem, candidates));
  if (fastest.feasible) return finish(fastest, 0.0, "optimal");

  // Search: CBC with preprocessing, for a good incumbent. evaluate() is the judge of every
  // assignment CBC returns.
  CbcPass search;
  search.node_limit = options.node_limit;
  const SolverRun searched = run_cbc(problem, candidates, {}, search);
  if (!searched.assignment.empty()) {
    const StageSolution found = evaluate(problem, searched.assignment);
    if (found.feasible && found.exposed_ps < best.exposed_ps) best = found;
  }

  // Certify: CBC without preprocessing, looking only at plans at least as good as the
  // incumbent (cutoff half a picosecond above it). A complete search that finds nothing proves
  // the incumbent optimal; one that finds a plan proves that plan optimal. CBC accepts plans
  // within its feasibility tolerance (about 1e-7 of the largest byte count), so near the budget
  // a rounded plan can exceed it by a few bytes: such a plan is cut off by a no-good row that
  // removes it alone, and the search runs again.
  constexpr int kMaxRounds = 16;
  std::vector<std::vector<int>> excluded;
  SolverRun certified_run = searched;
  bool certified = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    CbcPass certify;
    certify.preprocess = false;
    certify.cutoff_ns = to_ns(best.exposed_ps) + 5e-4;
    certify.node_limit = options.node_limit;
    certified_run = run_cbc(problem, candidates, excluded, certify);
    if (certified_run.assignment.empty()) {
      certified = certified_run.cbc.complete;
      break;
    }
    const StageSolution found = evaluate(problem, certified_run.assignment);
    if (!found.feasible) {
      excluded.push_back(certified_run.assignment);
      continue;
    }
    if (found.exposed_ps <= best.exposed_ps) best = found;
    certified = certified_run.cbc.complete;
    break;
  }

  best = with_least_work(problem, candidates, best);
  if (certified) return finish(best, 0.0, "optimal");
  const double objective_ns = to_ns(best.exposed_ps);
  // Exposed times are never negative, so 0 is always a valid bound.
  const double bound_ns = std::clamp(certified_run.cbc.bound_ns, 0.0, objective_ns);
  const double gap = (objective_ns - bound_ns) / std::max(std::abs(objective_ns), 1e-9);
  if (certified_run.cbc.stopped_on_limit)
    return finish(best, gap, fmt::format("node limit (gap {:.2f}%)", 100.0 * gap), true);
  return finish(best, gap,
                fmt::format("stopped: CBC status {}/{} (gap {:.2f}%)", certified_run.cbc.status,
                            certified_run.cbc.secondary_status, 100.0 * gap));
}

}  // namespace lynx::strategies
