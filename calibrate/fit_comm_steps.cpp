// calibrate::detail: the fit steps of the communication fields: collectives, the intra-node
// link (or the NCCL model), the inter-node link and the collective efficiency.
#include "calibrate/fit_steps.hpp"

#include <algorithm>
#include <cmath>

namespace lynx::calibrate::detail {

CollectiveGroups fit_collectives(FitState& st) {
  CollectiveGroups groups;
  int single_rank_rows = 0;
  for (const Measurement* row : rows_of(st.raw, MeasurementKind::kCollective)) {
    if (row->ranks < 2) {
      ++single_rank_rows;
      continue;
    }
    (void)ring_cost(row->name, row->ranks);  // rejects unknown collective names
    groups[{row->name, row->scope, row->ranks, row->nodes}].push_back(row);
  }
  if (single_rank_rows > 0)
    st.report.notes.push_back(fmt::format(
        "collectives: {} row(s) on 1 rank (n=1: a local copy, no link crossed) recorded but "
        "not fitted",
        single_rank_rows));
  for (const auto& [key, rows] : groups)
    if (auto fit = fit_alpha_beta(rows, st.report.notes)) st.report.collectives.push_back(*fit);
  return groups;
}

LinkFit fit_intra_link(FitState& st, const CollectiveGroups& groups) {
  const HardwareSpec& base = st.base;
  const bool pcie_nodes = base.intra_node == IntraNode::kPcie;
  LinkSpec HardwareSpec::*intra_link = pcie_nodes ? &HardwareSpec::pcie : &HardwareSpec::nvlink;
  const std::string intra_field = pcie_nodes ? "node.pcie" : "node.nvlink";
  std::vector<LinkRow> intra_rows;
  for (const auto& [key, rows] : groups) {
    for (const Measurement* row : rows) {
      if (row->scope != "intra") continue;
      const RingCost cost = ring_cost(row->name, row->ranks);
      LinkRow r;
      r.steps = cost.steps;
      r.wire = cost.wire_factor * static_cast<double>(row->bytes);
      r.measured_s = row->time_us_median / kUsPerS;
      r.time_s = r.measured_s;
      intra_rows.push_back(r);
    }
  }
  LinkFit intra = fit_link(intra_rows, intra_field, st.report.notes);
  if (intra.fitted && base.gpus_per_node < 2) {
    st.report.notes.push_back(intra_field + ": the base profile has 1 GPU per node; link not set");
    intra.fitted = false;
  }
  if (intra.fitted) {
    const PathLatencyModel path = path_latency_model(base, intra_link, 1, 0, 1);
    st.report.fields.push_back(apply_link_fit(intra, path, st.fitted.*intra_link, base,
                                              intra_field, st.source, st.report.notes));
  } else {
    const LinkSpec& link = base.*intra_link;
    st.report.fields.push_back(not_measured(
        intra_field,
        fmt::format("bw {}, latency {}", format_bw(static_cast<double>(link.bw_bytes_per_s)),
                    format_us(static_cast<double>(link.latency_ps) / kPsPerS)),
        "no intra-node collectives on >= 2 GPUs"));
  }
  return intra;
}

LinkFit fit_nccl_intra(FitState& st, const CollectiveGroups& groups) {
  const HardwareSpec& base = st.base;
  const bool pcie_nodes = base.intra_node == IntraNode::kPcie;
  LinkSpec HardwareSpec::*intra_link = pcie_nodes ? &HardwareSpec::pcie : &HardwareSpec::nvlink;
  TimePs NcclProtocol::*step_field = pcie_nodes ? &NcclProtocol::step_pcie_ps : &NcclProtocol::step_nvlink_ps;
  const std::string link_field = pcie_nodes ? "node.pcie" : "node.nvlink";
  const std::string step_name = pcie_nodes ? "step_pcie" : "step_nvlink";
  struct Row {
    double steps, wire, buffer, time;  ///< buffer: the bytes of the call's buffer pass (ring_cost's buffer_share)
  };
  std::vector<Row> rows;
  for (const auto& [key, group] : groups)
    for (const Measurement* row : group) {
      if (row->scope != "intra") continue;
      const RingCost cost = ring_cost(row->name, row->ranks);
      rows.push_back({static_cast<double>(cost.steps), cost.wire_factor * static_cast<double>(row->bytes),
                      cost.buffer_share * static_cast<double>(row->bytes), row->time_us_median / kUsPerS});
    }
  LinkFit out;
  if (rows.size() < 2 || base.gpus_per_node < 2) {
    const LinkSpec& link = base.*intra_link;
    st.report.fields.push_back(not_measured(
        link_field,
        fmt::format("bw {}", format_bw(static_cast<double>(link.bw_bytes_per_s))),
        "fewer than 2 intra-node collectives on >= 2 GPUs"));
    return out;
  }
  HardwareSpec one_node = base;
  one_node.nodes = 1;
  const double path_s = static_cast<double>(hw_models::Topology(one_node).path_latency_ps(0, 1)) / kPsPerS;
  struct Proto {
    const char* name;
    NcclProtocol* fitted;
    double f, c, lambda;
  };
  std::vector<Proto> protos;
  for (auto [name, member] : {std::pair{"simple", &NcclSpec::simple}, std::pair{"ll128", &NcclSpec::ll128},
                              std::pair{"ll", &NcclSpec::ll}}) {
    NcclProtocol& p = st.fitted.nccl.*member;
    if (p.bw_fraction > 0.0)
      protos.push_back({name, &p, p.bw_fraction, static_cast<double>(p.base_ps) / kPsPerS + path_s,
                        static_cast<double>(p.*step_field) / kPsPerS});
  }
  double inv_b = 1.0 / (static_cast<double>((base.*intra_link).bw_bytes_per_s) * base.collective_efficiency);
  // 1 / nccl.buffer_bw (0: no buffer pass), fitted when rows of several sizes have one.
  double inv_buffer = base.nccl.buffer_bw_bytes_per_s > 0 ? 1.0 / static_cast<double>(base.nccl.buffer_bw_bytes_per_s) : 0.0;
  const bool fit_buffer = std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.buffer != rows.front().buffer; });
  std::vector<std::size_t> assigned(rows.size(), SIZE_MAX);
  int rounds = 0;
  for (; rounds < 20; ++rounds) {
    bool changed = false;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::size_t best = 0;
      double best_t = 0.0;
      for (std::size_t p = 0; p < protos.size(); ++p) {
        const double t = protos[p].c + rows[i].steps * protos[p].lambda + rows[i].wire * inv_b / protos[p].f +
                         rows[i].buffer * inv_buffer;
        if (p == 0 || t < best_t) {
          best = p;
          best_t = t;
        }
      }
      changed = changed || assigned[i] != best;
      assigned[i] = best;
    }
    if (!changed) break;
    // Columns: c_p and λ_p of each protocol that can be fitted, then 1/B.
    std::vector<std::vector<double>> columns;
    std::vector<std::pair<std::size_t, bool>> what;  // (protocol, is λ)
    for (std::size_t p = 0; p < protos.size(); ++p) {
      std::vector<double> one(rows.size(), 0.0), steps(rows.size(), 0.0);
      double first_steps = -1.0;
      bool several_steps = false, any = false;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (assigned[i] != p) continue;
        any = true;
        one[i] = 1.0;
        steps[i] = rows[i].steps;
        if (first_steps < 0.0) first_steps = rows[i].steps;
        several_steps = several_steps || rows[i].steps != first_steps;
      }
      if (!any) continue;
      columns.push_back(one);
      what.push_back({p, false});
      if (several_steps) {
        columns.push_back(steps);
        what.push_back({p, true});
      }
    }
    std::vector<double> wire(rows.size()), y(rows.size()), weight(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Proto& pr = protos[assigned[i]];
      wire[i] = rows[i].wire / pr.f;
      y[i] = rows[i].time;
      weight[i] = 1.0 / (rows[i].time * rows[i].time);
      // Terms kept from the base move to the left-hand side.
      bool lambda_fitted = false;
      for (const auto& [p, is_lambda] : what) lambda_fitted = lambda_fitted || (p == assigned[i] && is_lambda);
      if (!lambda_fitted) y[i] -= rows[i].steps * pr.lambda;
      if (!fit_buffer) y[i] -= rows[i].buffer * inv_buffer;
    }
    if (fit_buffer) {
      std::vector<double> buffer(rows.size());
      for (std::size_t i = 0; i < rows.size(); ++i) buffer[i] = rows[i].buffer;
      columns.push_back(buffer);
    }
    columns.push_back(wire);
    std::vector<double> coef;
    try {
      coef = fit_columns_weighted(columns, y, weight);
    } catch (const Error& e) {
      st.report.notes.push_back(fmt::format("nccl: {}; kept the base profile's values", e.what()));
      return out;
    }
    for (std::size_t j = 0; j < what.size(); ++j) {
      Proto& pr = protos[what[j].first];
      (what[j].second ? pr.lambda : pr.c) = std::max(0.0, coef[j]);
    }
    if (!(coef.back() > 0.0)) {
      st.report.notes.push_back("nccl: time does not grow with size; kept the base profile's values");
      return out;
    }
    inv_b = coef.back();
    if (fit_buffer) inv_buffer = std::max(0.0, coef[coef.size() - 2]);
  }
  std::vector<double> predicted, measured;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Proto& pr = protos[assigned[i]];
    predicted.push_back(pr.c + rows[i].steps * pr.lambda + rows[i].wire * inv_b / pr.f + rows[i].buffer * inv_buffer);
    measured.push_back(rows[i].time);
  }
  const double rms = rms_relative(predicted, measured);
  LinkSpec& link = st.fitted.*intra_link;
  link.bw_bytes_per_s = to_bw(1.0 / inv_b / base.collective_efficiency);
  FieldFit bw;
  bw.field = link_field;
  bw.fitted = true;
  bw.measurements = static_cast<int>(rows.size());
  bw.rms_relative_error = rms;
  bw.value = fmt::format("bw {} (ring {} achieved; collective_efficiency {} kept; latency kept)",
                         format_bw(static_cast<double>(link.bw_bytes_per_s)), format_bw(1.0 / inv_b),
                         base.collective_efficiency);
  bw.source = st.source + " (NCCL protocol fit)";
  st.report.fields.push_back(bw);
  if (fit_buffer && inv_buffer > 0.0) {
    st.fitted.nccl.buffer_bw_bytes_per_s = to_bw(1.0 / inv_buffer);
    FieldFit f;
    f.field = "nccl.buffer_bw";
    f.fitted = true;
    f.measurements = static_cast<int>(rows.size());
    f.rms_relative_error = rms;
    f.value = format_bw(1.0 / inv_buffer);
    f.source = st.source + " (NCCL protocol fit)";
    st.report.fields.push_back(f);
  } else {
    st.report.fields.push_back(not_measured("nccl.buffer_bw", fit_buffer ? "0 (fitted none)" : "kept",
                                            fit_buffer ? "the fit found no buffer pass" : "rows of one size only"));
    if (fit_buffer) st.fitted.nccl.buffer_bw_bytes_per_s = 0;
  }
  for (const Proto& pr : protos) {
    int used = 0;
    for (std::size_t a : assigned) used += protos[a].fitted == pr.fitted ? 1 : 0;
    if (used == 0) {
      st.report.fields.push_back(not_measured(fmt::format("nccl.{}", pr.name), "kept",
                                              "no row is fastest on this protocol"));
      continue;
    }
    pr.fitted->base_ps = seconds_to_ps(std::max(0.0, pr.c - path_s));
    pr.fitted->*step_field = seconds_to_ps(pr.lambda);
    FieldFit f;
    f.field = fmt::format("nccl.{}", pr.name);
    f.fitted = true;
    f.measurements = used;
    f.rms_relative_error = rms;
    f.value = fmt::format("base {}, {} {} ({} rounds)", format_us(std::max(0.0, pr.c - path_s)), step_name,
                          format_us(pr.lambda), rounds);
    f.source = st.source + " (NCCL protocol fit)";
    st.report.fields.push_back(f);
  }
  out.fitted = true;
  out.bw = 1.0 / inv_b;
  for (const Proto& pr : protos)
    if (pr.fitted == &st.fitted.nccl.simple) out.step_latency_s = pr.lambda;
  out.measurements = static_cast<int>(rows.size());
  out.rms = rms;
  return out;
}

void fit_inter_link(FitState& st, const CollectiveGroups& groups, const LinkFit& intra) {
  const HardwareSpec& base = st.base;
  std::vector<std::string>& notes = st.report.notes;
  std::vector<LinkRow> inter_rows;
  bool inter_seen = false;
  int gpus_per_node_seen = 0;
  for (const auto& [key, rows] : groups) {
    for (const Measurement* row : rows) {
      if (row->scope != "inter") continue;
      inter_seen = true;
      if (row->nodes < 2 || row->ranks % row->nodes != 0) {
        notes.push_back(fmt::format(
            "node.nic: {} over {} ranks on {} nodes is not an even hierarchical layout; skipped",
            row->name, row->ranks, row->nodes));
        continue;
      }
      const int k = row->ranks / row->nodes;
      gpus_per_node_seen = std::max(gpus_per_node_seen, k);
      const double s = static_cast<double>(row->bytes);
      LinkRow r;
      r.measured_s = row->time_us_median / kUsPerS;
      if (row->name == "send_recv") {
        r.steps = 1;
        r.wire = s;
      } else {
        const RingCost inter_cost = ring_cost(row->name, row->nodes);
        const int nics = std::max(1, base.nics_per_node);
        const double rings_per_nic = std::ceil(static_cast<double>(k) / nics);
        r.steps = inter_cost.steps;
        r.wire = rings_per_nic * inter_cost.wire_factor * s / k;
        if (k > 1) {
          // One intra ring phase: (k−1)/k·S at the intra ring bandwidth, k−1 steps.
          double intra_bw = 0.0, intra_step = 0.0;
          if (intra.fitted) {
            intra_bw = intra.bw;
            intra_step = intra.step_latency_s;
          } else {
            HardwareSpec one_node = base;
            one_node.nodes = 1;
            const hw_models::Topology topo(one_node);
            intra_bw = static_cast<double>(topo.path_bw_bytes_per_s(0, 1)) *
                       base.collective_efficiency;
            intra_step = static_cast<double>(topo.path_latency_ps(0, 1)) / kPsPerS;
          }
          const double phase = (k - 1.0) / k * s / intra_bw + (k - 1) * intra_step;
          r.offset_s = (row->name == "all_reduce" ? 2.0 : 1.0) * phase;
        }
      }
      r.time_s = r.measured_s - r.offset_s;
      if (r.time_s <= 0.0) {
        notes.push_back(fmt::format(
            "node.nic: {} of {} bytes: the modelled intra-node phases ({}) exceed the measured "
            "time ({}); skipped",
            row->name, row->bytes, format_us(r.offset_s), format_us(r.measured_s)));
        continue;
      }
      inter_rows.push_back(r);
    }
  }
  LinkFit inter = fit_link(inter_rows, "node.nic", notes);
  if (!inter.fitted) {
    st.report.fields.push_back(not_measured(
        "node.nic",
        fmt::format("bw {}, latency {}", format_bw(static_cast<double>(base.nic.bw_bytes_per_s)),
                    format_us(static_cast<double>(base.nic.latency_ps) / kPsPerS)),
        inter_seen ? "inter-node rows unusable (see notes)" : "no inter-node collectives"));
    return;
  }
  HardwareSpec two_nodes = base;
  if (gpus_per_node_seen > 0 && two_nodes.gpus_per_node < gpus_per_node_seen)
    notes.push_back(fmt::format("node.nic: measured {} ranks per node, the base profile has {}",
                                gpus_per_node_seen, base.gpus_per_node));
  const PathLatencyModel path =
      path_latency_model(two_nodes, &HardwareSpec::nic, 2, 0, base.gpus_per_node);
  st.report.fields.push_back(
      apply_link_fit(inter, path, st.fitted.nic, base, "node.nic", st.source, notes));
  const double pcie_bw = static_cast<double>(st.fitted.pcie.bw_bytes_per_s);
  if (static_cast<double>(st.fitted.nic.bw_bytes_per_s) > pcie_bw)
    notes.push_back(fmt::format(
        "node.nic: fitted {} exceeds node.pcie ({}), which the simulated GPUDirect path also "
        "crosses: inter-node transfers stay limited by PCIe",
        format_bw(static_cast<double>(st.fitted.nic.bw_bytes_per_s)), format_bw(pcie_bw)));
}

void report_collective_efficiency(FitState& st) {
  FieldFit eff;
  eff.field = "collective_efficiency";
  eff.value = fmt::format("{}", st.base.collective_efficiency);
  eff.source = "kept from the base profile by design: measured ring bandwidth goes into the "
               "link bandwidths (divided by this factor)";
  st.report.fields.push_back(eff);
}

}  // namespace lynx::calibrate::detail
