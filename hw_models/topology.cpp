#include "hw_models/topology.hpp"

#include "common/checked.hpp"
#include "common/error.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace lynx::hw_models {

namespace {

enum class VertexKind : std::uint8_t { kGpu, kNvSwitch, kPcieSwitch, kHost, kNic, kFabric };

struct VertexInfo {
  VertexKind kind = VertexKind::kGpu;
  int node = -1;   ///< -1 for the fabric
  int index = 0;   ///< local GPU / PCIe switch / NIC index
};
struct EdgeInfo {
  sim::LinkId link = 0;
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexInfo, EdgeInfo>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;
using Edge = boost::graph_traits<Graph>::edge_descriptor;

constexpr unsigned kind_bit(VertexKind kind) { return 1U << static_cast<unsigned>(kind); }

/// What a link is for, seen from the GPU that owns it (for mirroring between GPUs).
enum class LinkRole : std::uint8_t {
  kNvlinkUp, kNvlinkDown,      ///< GPU -> NVSwitch, NVSwitch -> GPU
  kPcieUp, kPcieDown,          ///< GPU -> PCIe switch, PCIe switch -> GPU
  kHostUp, kHostDown,          ///< PCIe switch -> host, host -> PCIe switch
  kNicIn, kNicOut,             ///< PCIe switch -> NIC, NIC -> PCIe switch
  kFabricUp, kFabricDown,      ///< NIC -> fabric, fabric -> NIC
};
constexpr int kNumLinkRoles = 10;
constexpr int kNoOwner = -1;

/// Vertices a path segment may pass through: its two ends, and vertices of one node whose kind
/// is allowed as a transit hop (GPUs never forward traffic).
struct TransitFilter {
  const Graph* graph = nullptr;
  int node = 0;
  unsigned allowed_kinds = 0;
  Vertex from = 0, to = 0;
  bool operator()(Vertex v) const {
    if (v == from || v == to) return true;
    const VertexInfo& info = (*graph)[v];
    return info.node == node && (allowed_kinds & kind_bit(info.kind)) != 0;
  }
};

using FilteredGraph = boost::filtered_graph<Graph, boost::keep_all, TransitFilter>;

/// Records the BFS tree edge that first reached each vertex.
class TreeEdgeRecorder : public boost::default_bfs_visitor {
 public:
  explicit TreeEdgeRecorder(std::vector<std::optional<Edge>>* reached_by)
      : reached_by_(reached_by) {}
  void tree_edge(Edge e, const FilteredGraph& g) const { (*reached_by_)[boost::target(e, g)] = e; }

 private:
  std::vector<std::optional<Edge>>* reached_by_;
};

std::string vertex_name(const VertexInfo& v) {
  switch (v.kind) {
    case VertexKind::kGpu: return fmt::format("gpu{}", v.index);
    case VertexKind::kNvSwitch: return "nvswitch";
    case VertexKind::kPcieSwitch: return fmt::format("pcie{}", v.index);
    case VertexKind::kHost: return "host";
    case VertexKind::kNic: return fmt::format("nic{}", v.index);
    case VertexKind::kFabric: return "fabric";
  }
  return "?";
}

void check_link_spec(const LinkSpec& link, const char* field, const std::string& profile) {
  if (link.bw_bytes_per_s == 0)
    fail(ErrorCode::kBadHardware, "hardware '{}': {} bandwidth must be positive", profile, field);
  if (link.latency_ps < 0) fail(ErrorCode::kBadHardware, "hardware '{}': {} latency must be >= 0", profile, field);
}

}  // namespace

struct Topology::Impl {
  int nodes = 1;
  int gpus_per_node = 1;
  bool nvswitch = false;
  int gpus_per_pcie_switch = 1;
  int pcie_switches_per_node = 1;
  int nics_per_node = 0;
  bool multi_node = false;
  /// Consecutive nodes sharing one NVLink domain (hardware.node.nvlink_domain_gpus /
  /// gpus_per_node; 1 without a larger domain). The domain's switch fabric is the NVSwitch
  /// vertex of its first node; the other nodes' NVSwitch vertices carry no links.
  int nodes_per_domain = 1;
  /// The node whose links are being created (build): node 0's describe every node's.
  int building_node = 0;

  Graph graph;
  std::vector<sim::LinkDesc> links;
  // Vertex layout of node n: [n·vertices_per_node, +vertices_per_node) =
  // GPUs, NVSwitch (nvswitch nodes only; the domain's switch when n is a domain's first node),
  // PCIe switches, host, NICs (multi-node only);
  // the fabric vertex (multi-node only) is last. Links of node n are
  // [n·links_per_node, +links_per_node), created in the same order for every node, so a
  // path inside node 0 shifted by n·links_per_node is the same path inside node n.
  int vertices_per_node = 0;
  int links_per_node = 0;
  Vertex fabric = 0;

  /// Per link of node 0's block (the same for every node): its role and the local index of
  /// the GPU it belongs to (kNoOwner when several GPUs or none use it).
  std::vector<LinkRole> role_in_block;
  std::vector<int> owner_in_block;
  /// [role][local GPU] -> offset of that GPU's link of that role in a node block, or -1.
  std::vector<std::vector<int>> role_offset;
  mutable std::optional<bool> private_per_gpu;

  /// Per-node path templates (link ids inside node 0), computed once on demand.
  mutable std::unordered_map<std::uint64_t, std::vector<sim::LinkId>> local_segments;
  /// Full GPU-to-GPU paths, keyed src·num_gpus + dst (node-based map: references stay valid).
  mutable std::unordered_map<std::uint64_t, std::vector<sim::LinkId>> paths;
  /// Guards paths and local_segments: planners and fast mode's step simulations of one
  /// cluster ask for paths from several threads.
  mutable std::mutex paths_mutex;

  int num_gpus() const { return nodes * gpus_per_node; }
  int domain_of_node(int node) const { return node / nodes_per_domain; }

  Vertex gpu_vertex(int node, int local) const {
    return static_cast<Vertex>(node * vertices_per_node + local);
  }
  Vertex nvswitch_vertex(int node) const {
    return static_cast<Vertex>(node * vertices_per_node + gpus_per_node);
  }
  Vertex pcie_vertex(int node, int i) const {
    return static_cast<Vertex>(node * vertices_per_node + gpus_per_node + (nvswitch ? 1 : 0) + i);
  }
  Vertex host_vertex(int node) const { return pcie_vertex(node, pcie_switches_per_node); }
  Vertex nic_vertex(int node, int i) const {
    return static_cast<Vertex>(static_cast<int>(host_vertex(node)) + 1 + i);
  }
  int pcie_switch_of_gpu(int local) const { return local / gpus_per_pcie_switch; }
  /// Rail alignment: GPU g reaches other nodes through NIC g % nics (HardwareSpec).
  int rail_of_gpu(int local) const { return local % nics_per_node; }

  void add_link(Vertex from, Vertex to, const LinkSpec& spec, LinkRole role, int owner) {
    const VertexInfo& a = graph[from];
    const VertexInfo& b = graph[to];
    std::string name;
    if (a.kind == VertexKind::kFabric)
      name = fmt::format("fabric->n{}.{}", b.node, vertex_name(b));
    else if (b.kind == VertexKind::kFabric)
      name = fmt::format("n{}.{}->fabric", a.node, vertex_name(a));
    else if (a.node != b.node)  // to or from the switch of an NVLink domain on another node
      name = fmt::format("n{}.{}->n{}.{}", a.node, vertex_name(a), b.node, vertex_name(b));
    else
      name = fmt::format("n{}.{}->{}", a.node, vertex_name(a), vertex_name(b));
    const auto id = static_cast<sim::LinkId>(links.size());
    links.push_back(sim::LinkDesc{std::move(name), spec.bw_bytes_per_s, spec.latency_ps});
    boost::add_edge(from, to, EdgeInfo{id}, graph);
    if (building_node == 0) {  // node 0's block describes them all
      role_in_block.push_back(role);
      owner_in_block.push_back(owner);
    }
  }
  /// a -> b gets role `up`, b -> a role `down`; both belong to `owner`.
  void add_duplex(Vertex a, Vertex b, const LinkSpec& spec, LinkRole up, LinkRole down,
                  int owner) {
    add_link(a, b, spec, up, owner);
    add_link(b, a, spec, down, owner);
  }
  /// The only local GPU for which `uses(g)` holds, or kNoOwner.
  template <typename Predicate>
  int sole_gpu(Predicate uses) const {
    int found = kNoOwner;
    for (int g = 0; g < gpus_per_node; ++g) {
      if (!uses(g)) continue;
      if (found != kNoOwner) return kNoOwner;
      found = g;
    }
    return found;
  }

  void build(const HardwareSpec& hw) {
    for (int n = 0; n < nodes; ++n) {
      for (int g = 0; g < gpus_per_node; ++g)
        boost::add_vertex(VertexInfo{VertexKind::kGpu, n, g}, graph);
      if (nvswitch) boost::add_vertex(VertexInfo{VertexKind::kNvSwitch, n, 0}, graph);
      for (int p = 0; p < pcie_switches_per_node; ++p)
        boost::add_vertex(VertexInfo{VertexKind::kPcieSwitch, n, p}, graph);
      boost::add_vertex(VertexInfo{VertexKind::kHost, n, 0}, graph);
      if (multi_node)
        for (int i = 0; i < nics_per_node; ++i)
          boost::add_vertex(VertexInfo{VertexKind::kNic, n, i}, graph);
    }
    if (multi_node) fabric = boost::add_vertex(VertexInfo{VertexKind::kFabric, -1, 0}, graph);

    for (int n = 0; n < nodes; ++n) {
      building_node = n;
      const std::size_t first_link = links.size();
      if (nvswitch)  // to the switch of the node's NVLink domain
        for (int g = 0; g < gpus_per_node; ++g)
          add_duplex(gpu_vertex(n, g), nvswitch_vertex(domain_of_node(n) * nodes_per_domain), hw.nvlink,
                     LinkRole::kNvlinkUp, LinkRole::kNvlinkDown, g);
      for (int g = 0; g < gpus_per_node; ++g)
        add_duplex(gpu_vertex(n, g), pcie_vertex(n, pcie_switch_of_gpu(g)), hw.pcie,
                   LinkRole::kPcieUp, LinkRole::kPcieDown, g);
      for (int p = 0; p < pcie_switches_per_node; ++p)
        add_duplex(pcie_vertex(n, p), host_vertex(n), hw.pcie_host, LinkRole::kHostUp,
                   LinkRole::kHostDown, sole_gpu([&](int g) { return pcie_switch_of_gpu(g) == p; }));
      if (multi_node) {
        // NIC i sits on the PCIe switch of GPU i·gpus_per_node/nics (spread evenly).
        for (int i = 0; i < nics_per_node; ++i)
          add_duplex(pcie_vertex(n, nic_switch(i)), nic_vertex(n, i), hw.pcie, LinkRole::kNicIn,
                     LinkRole::kNicOut, sole_gpu([&](int g) { return rail_of_gpu(g) == i; }));
        for (int i = 0; i < nics_per_node; ++i)
          add_duplex(nic_vertex(n, i), fabric, hw.nic, LinkRole::kFabricUp,
                     LinkRole::kFabricDown, sole_gpu([&](int g) { return rail_of_gpu(g) == i; }));
      }
      links_per_node = static_cast<int>(links.size() - first_link);
    }
    role_offset.assign(kNumLinkRoles, std::vector<int>(static_cast<std::size_t>(gpus_per_node), -1));
    for (int offset = 0; offset < links_per_node; ++offset) {
      const int owner = owner_in_block[static_cast<std::size_t>(offset)];
      if (owner == kNoOwner) continue;
      const auto role = static_cast<std::size_t>(role_in_block[static_cast<std::size_t>(offset)]);
      role_offset[role][static_cast<std::size_t>(owner)] = offset;
    }
  }

  int nvlink_offset(LinkRole role, int local) const {
    return role_offset[static_cast<std::size_t>(role)][static_cast<std::size_t>(local)];
  }

  int nic_switch(int nic) const { return pcie_switch_of_gpu(nic * gpus_per_node / nics_per_node); }

  /// True when every link any GPU-to-GPU path crosses belongs to one GPU that is an end of
  /// that path (checked over every path template of a node).
  bool compute_private_per_gpu() const {
    auto owned_by = [&](const std::vector<sim::LinkId>& segment, int a, int b) {
      for (sim::LinkId link : segment) {
        const int owner = owner_in_block[static_cast<std::size_t>(link)];
        if (owner == kNoOwner || (owner != a && owner != b)) return false;
      }
      return true;
    };
    for (int a = 0; a < gpus_per_node; ++a) {
      for (int b = 0; b < gpus_per_node; ++b)
        if (a != b && !owned_by(local_segment(0, a, b), a, b)) return false;
      if (multi_node) {
        const int rail = rail_of_gpu(a);
        if (!owned_by(local_segment(1, a, rail), a, a)) return false;
        if (!owned_by(local_segment(2, rail, a), a, a)) return false;
        // The fabric links of the rail.
        const std::vector<sim::LinkId> fabric_links{fabric_link(0, rail, true),
                                                    fabric_link(0, rail, false)};
        if (!owned_by(fabric_links, a, a)) return false;
      }
    }
    return true;
  }

  sim::LinkId mirror(sim::LinkId link, const std::vector<Rank>& rank_to_rep) const {
    if (link < 0 || static_cast<std::size_t>(link) >= links.size())
      fail(ErrorCode::kInternal, "link id {} is out of range ({} links)", link, links.size());
    const int node = link / links_per_node;
    const int offset = link % links_per_node;
    const int owner = owner_in_block[static_cast<std::size_t>(offset)];
    if (owner == kNoOwner) return link;
    const Rank owner_rank = node * gpus_per_node + owner;
    if (static_cast<std::size_t>(owner_rank) >= rank_to_rep.size()) return link;
    const Rank rep = rank_to_rep[static_cast<std::size_t>(owner_rank)];
    if (rep < 0) return link;
    check_rank(rep);
    const auto role = static_cast<std::size_t>(role_in_block[static_cast<std::size_t>(offset)]);
    const int rep_offset = role_offset[role][static_cast<std::size_t>(rep % gpus_per_node)];
    if (rep_offset < 0) return link;  // the representative has no link of that role of its own
    return (rep / gpus_per_node) * links_per_node + rep_offset;
  }

  /// BFS shortest path (fewest links; ties broken by link creation order, so deterministic)
  /// from `from` to `to` through allowed transit vertices of `node`.
  std::vector<sim::LinkId> bfs_path(Vertex from, Vertex to, int node, unsigned transit) const {
    const TransitFilter filter{&graph, node, transit, from, to};
    const FilteredGraph view(graph, boost::keep_all(), filter);
    std::vector<std::optional<Edge>> reached_by(boost::num_vertices(graph));
    boost::breadth_first_search(view, from, boost::visitor(TreeEdgeRecorder(&reached_by)));
    LYNX_CHECK(reached_by[to].has_value(), "no path between topology vertices {} and {}",
               vertex_name(graph[from]), vertex_name(graph[to]));
    std::vector<sim::LinkId> reversed;
    for (Vertex v = to; v != from; v = boost::source(*reached_by[v], graph))
      reversed.push_back(graph[*reached_by[v]].link);
    return {reversed.rbegin(), reversed.rend()};
  }

  /// Cached path inside node 0 (kind 0: GPU a -> GPU b; 1: GPU a -> NIC b; 2: NIC a -> GPU b).
  const std::vector<sim::LinkId>& local_segment(int kind, int a, int b) const {
    const auto key = (static_cast<std::uint64_t>(kind) << 40) |
                     (static_cast<std::uint64_t>(a) << 20) | static_cast<std::uint64_t>(b);
    auto it = local_segments.find(key);
    if (it != local_segments.end()) return it->second;
    const unsigned pcie_transit = kind_bit(VertexKind::kPcieSwitch) | kind_bit(VertexKind::kHost);
    std::vector<sim::LinkId> segment;
    if (kind == 0) {
      // GPU to GPU: over NVSwitch when the node has one, else over the PCIe tree.
      const unsigned transit = nvswitch ? kind_bit(VertexKind::kNvSwitch) : pcie_transit;
      segment = bfs_path(gpu_vertex(0, a), gpu_vertex(0, b), 0, transit);
    } else if (kind == 1) {
      segment = bfs_path(gpu_vertex(0, a), nic_vertex(0, b), 0, pcie_transit);  // GPUDirect RDMA
    } else {
      segment = bfs_path(nic_vertex(0, a), gpu_vertex(0, b), 0, pcie_transit);
    }
    return local_segments.emplace(key, std::move(segment)).first->second;
  }

  void append_shifted(std::vector<sim::LinkId>& out, const std::vector<sim::LinkId>& segment,
                      int node) const {
    for (sim::LinkId link : segment) out.push_back(link + node * links_per_node);
  }

  /// The link id of the NIC's uplink (nic -> fabric) or downlink (fabric -> nic) in node n:
  /// the last 2·nics links of every node block, in (up, down) pairs per NIC.
  sim::LinkId fabric_link(int node, int nic, bool up) const {
    return node * links_per_node + links_per_node - 2 * nics_per_node + 2 * nic + (up ? 0 : 1);
  }

  std::vector<sim::LinkId> compute_path(Rank src, Rank dst) const {
    std::vector<sim::LinkId> path;
    if (src == dst) return path;
    const int src_node = src / gpus_per_node, src_local = src % gpus_per_node;
    const int dst_node = dst / gpus_per_node, dst_local = dst % gpus_per_node;
    if (src_node == dst_node) {
      append_shifted(path, local_segment(0, src_local, dst_local), src_node);
      return path;
    }
    if (nvswitch && domain_of_node(src_node) == domain_of_node(dst_node)) {
      // Another node of the same NVLink domain: src's NVLink up to the domain's switch, then
      // dst's NVLink down (each the same link of its own node as inside one node).
      path.push_back(src_node * links_per_node + nvlink_offset(LinkRole::kNvlinkUp, src_local));
      path.push_back(dst_node * links_per_node + nvlink_offset(LinkRole::kNvlinkDown, dst_local));
      return path;
    }
    // Across nodes, GPUDirect RDMA with each GPU on its own rail NIC (HardwareSpec: GPU g uses
    // NIC g % nics), as NCCL picks the NIC closest to each GPU at both ends: src GPU -> NIC
    // (src rail) -> fabric -> NIC (dst rail) on the destination node -> dst GPU. The fabric is
    // one non-blocking switch, so a cross-rail hop costs nothing extra.
    const int src_rail = rail_of_gpu(src_local);
    const int dst_rail = rail_of_gpu(dst_local);
    append_shifted(path, local_segment(1, src_local, src_rail), src_node);
    path.push_back(fabric_link(src_node, src_rail, true));
    path.push_back(fabric_link(dst_node, dst_rail, false));
    append_shifted(path, local_segment(2, dst_rail, dst_local), dst_node);
    return path;
  }

  void check_rank(Rank r) const {
    if (r < 0 || r >= num_gpus())
      fail(ErrorCode::kInternal, "GPU rank {} is out of range: the cluster has {} GPUs", r, num_gpus());
  }
};

Topology::Topology(const HardwareSpec& hw, std::int64_t gpus_used) : impl_(std::make_unique<Impl>()) {
  Impl& t = *impl_;
  const std::string& profile = hw.profile;
  if (hw.nodes < 1) fail(ErrorCode::kBadHardware, "hardware '{}': nodes must be >= 1, got {}", profile, hw.nodes);
  if (hw.gpus_per_node < 1)
    fail(ErrorCode::kBadHardware, "hardware '{}': gpus_per_node must be >= 1, got {}", profile, hw.gpus_per_node);
  if (hw.gpus_per_pcie_switch < 1)
    fail(ErrorCode::kBadHardware, "hardware '{}': gpus_per_pcie_switch must be >= 1, got {}", profile,
         hw.gpus_per_pcie_switch);
  const std::int64_t nodes_used = (gpus_used + hw.gpus_per_node - 1) / hw.gpus_per_node;
  t.nodes = gpus_used > 0 ? static_cast<int>(std::min<std::int64_t>(hw.nodes, nodes_used)) : hw.nodes;
  t.gpus_per_node = hw.gpus_per_node;
  t.nvswitch = hw.intra_node == IntraNode::kNvSwitch;
  t.gpus_per_pcie_switch = hw.gpus_per_pcie_switch;
  t.pcie_switches_per_node = (hw.gpus_per_node + hw.gpus_per_pcie_switch - 1) /
                             hw.gpus_per_pcie_switch;
  t.multi_node = t.nodes > 1;
  if (t.nvswitch) check_link_spec(hw.nvlink, "nvlink", profile);
  if (hw.nvlink_domain_gpus < 0 || hw.domain_gpus() % hw.gpus_per_node != 0 ||
      (hw.domain_gpus() > hw.gpus_per_node && !t.nvswitch))
    fail(ErrorCode::kBadHardware,
         "hardware '{}': an NVLink domain of {} GPUs must be a whole number of NVSwitch nodes of {} GPUs", profile,
         hw.nvlink_domain_gpus, hw.gpus_per_node);
  t.nodes_per_domain = hw.domain_gpus() / hw.gpus_per_node;
  check_link_spec(hw.pcie, "pcie", profile);
  check_link_spec(hw.pcie_host, "pcie_host", profile);
  if (t.multi_node) {
    if (hw.nics_per_node < 1)
      fail(ErrorCode::kBadHardware, "hardware '{}': {} nodes need nics_per_node >= 1, got {}", profile, t.nodes,
           hw.nics_per_node);
    check_link_spec(hw.nic, "nic", profile);
    t.nics_per_node = hw.nics_per_node;
  }
  t.vertices_per_node = t.gpus_per_node + (t.nvswitch ? 1 : 0) + t.pcie_switches_per_node + 1 +
                        (t.multi_node ? t.nics_per_node : 0);
  // Vertex numbers are ints (node * vertices_per_node + i): the whole graph must fit one.
  if (checked_product("topology vertices (nodes x vertices per node)",
                      {t.nodes, t.vertices_per_node}) >= std::numeric_limits<int>::max())
    fail(ErrorCode::kWorkTooLarge, "hardware '{}': {} nodes of {} vertices each are too many to build", profile, t.nodes,
         t.vertices_per_node);
  t.build(hw);
}

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

int Topology::num_gpus() const { return impl_->num_gpus(); }

int Topology::node_of(Rank r) const {
  impl_->check_rank(r);
  return r / impl_->gpus_per_node;
}

int Topology::domain_of(Rank r) const { return impl_->domain_of_node(node_of(r)); }

const std::vector<sim::LinkDesc>& Topology::links() const { return impl_->links; }

bool Topology::links_private_per_gpu() const {
  if (!impl_->private_per_gpu) impl_->private_per_gpu = impl_->compute_private_per_gpu();
  return *impl_->private_per_gpu;
}

sim::LinkId Topology::mirror_link(sim::LinkId link, const std::vector<Rank>& rank_to_rep) const {
  return impl_->mirror(link, rank_to_rep);
}

const std::vector<sim::LinkId>& Topology::path(Rank src, Rank dst) const {
  impl_->check_rank(src);
  impl_->check_rank(dst);
  const auto key = static_cast<std::uint64_t>(src) * static_cast<std::uint64_t>(num_gpus()) +
                   static_cast<std::uint64_t>(dst);
  const std::lock_guard lock(impl_->paths_mutex);
  auto it = impl_->paths.find(key);
  if (it != impl_->paths.end()) return it->second;
  return impl_->paths.emplace(key, impl_->compute_path(src, dst)).first->second;
}

TimePs Topology::path_latency_ps(Rank src, Rank dst) const {
  TimePs total = 0;
  for (sim::LinkId link : path(src, dst))
    total = checked_add(total, impl_->links[static_cast<std::size_t>(link)].latency_ps,
                        "a path's latency (the hardware.node.*.latency of its links)");
  return total;
}

std::uint64_t Topology::path_bw_bytes_per_s(Rank src, Rank dst) const {
  std::uint64_t smallest = std::numeric_limits<std::uint64_t>::max();
  for (sim::LinkId link : path(src, dst))
    smallest = std::min(smallest, impl_->links[static_cast<std::size_t>(link)].bw_bytes_per_s);
  return smallest;
}

}  // namespace lynx::hw_models
