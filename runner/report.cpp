#include "runner/report.hpp"

#include "common/bytes.hpp"
#include "runner/result_fields.hpp"
#include "scenarios/scenario_loader.hpp"
#include "common/error.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <ostream>
#include <sstream>

namespace lynx::runner {

const char* lynxsim_version() { return LYNXSIM_VERSION; }

ReportFormat parse_report_format(const std::string& text) {
  if (text == "table") return ReportFormat::kTable;
  if (text == "csv") return ReportFormat::kCsv;
  if (text == "json") return ReportFormat::kJson;
  fail(ErrorCode::kInvalidOption, "--format: unknown format '{}' (expected table, csv or json)", text);
}

namespace {

bool nothing_recomputed(const SimResult& r) {
  return std::all_of(r.stages.begin(), r.stages.end(), [](const StageBreakdown& s) {
    return s.recompute_s == 0 && s.recompute_overlapped_s == 0;
  });
}

/// Summary lines and the stage table come from the field table; the header says in words what
/// ran, so the configuration fields need no lines of their own.
void write_table(std::ostream& out, const SimResult& r) {
  const auto& m = r.scenario.model;
  const auto& p = r.scenario.parallel;
  fmt::print(out, "lynxsim {} — scenario {}: {} on {} × {} ({} GPUs: tp {}{} pp {} dp {})\n",
             lynxsim_version(), r.scenario.name, m.preset.empty() && m.hf_config.empty() ? "custom GPT" : model_name(m),
             r.scenario.hardware.nodes, r.scenario.hardware.profile, r.gpus, p.tp,
             p.cp > 1 ? fmt::format(" cp {}", p.cp) : "", p.pp, p.dp);
  fmt::print(out, "  global batch {} × seq {} = {} tokens; {} micro-batches of {} per pipeline{}\n",
             p.global_batch, m.seq_len, static_cast<long long>(p.global_batch) * m.seq_len,
             r.micro_batches, p.micro_batch, r.symmetric ? " (simulated one rank per stage)" : "");
  fmt::print(out, "  {}\n", strategy_sentence(r));
  const double capacity_gib = static_cast<double>(r.scenario.hardware.memory_bytes) / kGiB;
  fmt::print(out, "  memory: {}\n\n",
             r.oom ? fmt::format("OOM (stage {} exceeds {:.1f} GiB)", r.oom_stage, capacity_gib)
                   : fmt::format("fits in {:.1f} GiB per GPU", capacity_gib));

  const StageBreakdown no_stage;
  for (const ResultField* f : fields_of(FieldLevel::kRun)) {
    if (!f->table.label) continue;
    const FieldValue v = f->value(r, no_stage);
    if (f->table.hide_zero && ((v.kind == FieldValue::Kind::kReal && v.real == 0) ||
                               (v.kind == FieldValue::Kind::kInt && v.integer == 0)))
      continue;
    const std::string_view suffix = f->table.suffix;
    fmt::print(out, "  {:<16} {:>12}{}{}\n", f->table.label, table_cell(*f, v), suffix.empty() ? "" : " ", suffix);
  }
  fmt::print(out, "\n");
  // Stage table: cells first, so each column is as wide as its widest cell.
  std::vector<const ResultField*> columns;
  for (const ResultField* f : fields_of(FieldLevel::kStage))
    if (f->table.label) columns.push_back(f);
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> width;
  for (const ResultField* f : columns) width.push_back(std::string_view(f->table.label).size());
  for (const auto& s : r.stages) {
    auto& row = cells.emplace_back();
    for (std::size_t c = 0; c < columns.size(); ++c) {
      row.push_back(table_cell(*columns[c], columns[c]->value(r, s)));
      width[c] = std::max(width[c], row.back().size());
    }
  }
  std::string header;
  for (std::size_t c = 0; c < columns.size(); ++c)
    header += fmt::format(" {:>{}}", columns[c]->table.label, width[c]);
  fmt::print(out, " {}\n", header);
  for (const auto& row : cells) {
    std::string text;
    for (std::size_t c = 0; c < columns.size(); ++c) text += fmt::format(" {:>{}}", row[c], width[c]);
    fmt::print(out, " {}\n", text);
  }
  for (const ResultField* f : columns)
    if (f->table.explain) fmt::print(out, "  {}: {}\n", f->table.label, f->description);
}

void write_csv(std::ostream& out, const SimResult& r) {
  fmt::print(out, "# lynxsim {}\n", lynxsim_version());
  std::istringstream yaml(scenario_to_yaml(r.scenario));
  for (std::string line; std::getline(yaml, line);) fmt::print(out, "# {}\n", line);
  const auto run = fields_of(FieldLevel::kRun, true);
  const auto stage = fields_of(FieldLevel::kStage, true);
  fmt::print(out, "{},{}\n", csv_names(run), csv_names(stage));
  for (const auto& s : r.stages) fmt::print(out, "{},{}\n", csv_cells(run, r, s), csv_cells(stage, r, s));
}

void write_json(std::ostream& out, const SimResult& r) {
  const StageBreakdown no_stage;
  fmt::print(out, "{{\n");
  for (const ResultField* f : fields_of(FieldLevel::kRun))
    fmt::print(out, "  \"{}\": {},\n", f->name, json_literal(f->value(r, no_stage)));
  fmt::print(out, "  \"stages\": [\n");
  const auto stage_fields = fields_of(FieldLevel::kStage);
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    std::string object;
    for (const ResultField* f : stage_fields)
      object += fmt::format("{}\"{}\": {}", object.empty() ? "" : ", ", f->name,
                            json_literal(f->value(r, r.stages[i])));
    fmt::print(out, "    {{{}}}{}\n", object, i + 1 < r.stages.size() ? "," : "");
  }
  fmt::print(out, "  ]\n}}\n");
}

}  // namespace

std::string strategy_sentence(const SimResult& r) {
  std::string text;
  if (r.strategy_requested.empty() || r.strategy_requested == r.strategy)
    text = fmt::format("recompute {}", r.strategy);
  else
    text = fmt::format("recompute {} (requested) → ran {}: the engine found the narrower plan "
                       "faster, or the only one that fits",
                       r.strategy_requested, r.strategy);
  if (r.strategy != "none" && nothing_recomputed(r))
    text += r.oom ? fmt::format("; nothing recomputed, yet stage {} does not fit", r.oom_stage)
                  : std::string("; nothing recomputed: all activations fit");
  return text;
}

void write_report(std::ostream& out, const SimResult& result, ReportFormat format) {
  switch (format) {
    case ReportFormat::kTable: write_table(out, result); break;
    case ReportFormat::kCsv: write_csv(out, result); break;
    case ReportFormat::kJson: write_json(out, result); break;
  }
}

}  // namespace lynx::runner
