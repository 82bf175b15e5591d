#include "engine/topology/topology.h"

#include <fmt/format.h>

#include "engine/core/error.h"

namespace shardlab {

const char* dim_name(ParallelDim dim) {
  switch (dim) {
    case ParallelDim::Tp:
      return "tp";
    case ParallelDim::Pp:
      return "pp";
    case ParallelDim::Dp:
      return "dp";
  }
  SL_THROW(InvalidArgument, "unknown parallel dimension {}", static_cast<int>(dim));
}

Topology Topology::make(const TopologyConfig& config, int world) {
  const int64_t pp = config.pp, tp = config.tp, dp = config.dp;
  SL_ENFORCE(world >= 1, "parallel.world_size: must be >= 1, got {}", world);
  SL_ENFORCE(pp >= 1, "parallel.pp: must be >= 1, got {}", pp);
  SL_ENFORCE(tp >= 1, "parallel.tp: must be >= 1, got {}", tp);
  SL_ENFORCE(dp >= 1 || dp == -1, "parallel.dp: must be >= 1 or -1 (world / (pp x tp)), got {}",
             dp);
  // Products are formed only from factors <= world, so they cannot overflow int64.
  SL_ENFORCE(pp <= world, "parallel.pp: {} stages are more than the world size {}", pp, world);
  SL_ENFORCE(tp <= world, "parallel.tp: {} is more than the world size {}", tp, world);
  const int64_t pp_tp = pp * tp;
  if (dp == -1) {
    SL_ENFORCE(world % pp_tp == 0,
               "parallel.dp: -1 (world / (pp x tp)) needs pp x tp = {} x {} = {} to divide the "
               "world size {}",
               pp, tp, pp_tp, world);
    return Topology(static_cast<int>(pp), static_cast<int>(tp), static_cast<int>(world / pp_tp));
  }
  // Compared by division: pp * tp * dp can overflow when dp is far too large.
  if (world % pp_tp != 0 || world / pp_tp != dp) {
    int64_t product = 0;
    if (__builtin_mul_overflow(pp_tp, dp, &product))
      SL_THROW(InvalidArgument,
               "parallel.dp: pp x tp x dp = {} x {} x {} is more than the world size {}", pp, tp,
               dp, world);
    SL_THROW(InvalidArgument,
             "parallel.dp: pp x tp x dp = {} x {} x {} = {} does not equal the world size {}", pp,
             tp, dp, product, world);
  }
  return Topology(static_cast<int>(pp), static_cast<int>(tp), static_cast<int>(dp));
}

int Topology::size(ParallelDim dim) const {
  switch (dim) {
    case ParallelDim::Tp:
      return tp_;
    case ParallelDim::Pp:
      return pp_;
    case ParallelDim::Dp:
      return dp_;
  }
  SL_THROW(InvalidArgument, "unknown parallel dimension {}", static_cast<int>(dim));
}

void Topology::check_rank(int rank) const {
  SL_ENFORCE(rank >= 0 && rank < world(), "rank {} is outside the world of {} ranks ({}x{}x{})",
             rank, world(), pp_, tp_, dp_);
}

Coord Topology::coord(int rank) const {
  check_rank(rank);
  Coord c;
  c.tp = rank % tp_;
  c.dp = (rank / tp_) % dp_;
  c.pp = rank / (tp_ * dp_);
  return c;
}

int Topology::rank(Coord c) const {
  SL_ENFORCE(c.pp >= 0 && c.pp < pp_ && c.tp >= 0 && c.tp < tp_ && c.dp >= 0 && c.dp < dp_,
             "coordinate (pp {}, tp {}, dp {}) is outside the layout pp x tp x dp = {} x {} x {}",
             c.pp, c.tp, c.dp, pp_, tp_, dp_);
  return (c.pp * dp_ + c.dp) * tp_ + c.tp;
}

std::vector<int> Topology::group(ParallelDim dim, int rank) const {
  const Coord base = coord(rank);
  const int n = size(dim);
  std::vector<int> ranks;
  ranks.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Coord c = base;
    if (dim == ParallelDim::Tp) c.tp = i;
    if (dim == ParallelDim::Pp) c.pp = i;
    if (dim == ParallelDim::Dp) c.dp = i;
    ranks.push_back(this->rank(c));
  }
  return ranks;
}

std::vector<int> Topology::tp_group(int rank) const {
  return group(ParallelDim::Tp, rank);
}
std::vector<int> Topology::pp_group(int rank) const {
  return group(ParallelDim::Pp, rank);
}
std::vector<int> Topology::dp_group(int rank) const {
  return group(ParallelDim::Dp, rank);
}

int Topology::color(ParallelDim dim, int rank) const {
  const Coord c = coord(rank);
  switch (dim) {
    case ParallelDim::Tp:
      return c.pp * dp_ + c.dp;
    case ParallelDim::Pp:
      return c.dp * tp_ + c.tp;
    case ParallelDim::Dp:
      return c.pp * tp_ + c.tp;
  }
  SL_THROW(InvalidArgument, "unknown parallel dimension {}", static_cast<int>(dim));
}

int Topology::tp_color(int rank) const {
  return color(ParallelDim::Tp, rank);
}
int Topology::pp_color(int rank) const {
  return color(ParallelDim::Pp, rank);
}
int Topology::dp_color(int rank) const {
  return color(ParallelDim::Dp, rank);
}

std::string Topology::group_name(ParallelDim dim, int rank) const {
  return fmt::format("{}[{}]", dim_name(dim), color(dim, rank));
}

Topology::Groups Topology::build_groups(Communicator& world) const {
  SL_ENFORCE(world.size() == this->world(),
             "communicator {} has {} ranks but the layout pp x tp x dp = {} x {} x {} needs {}",
             world.name(), world.size(), pp_, tp_, dp_, this->world());
  const int r = world.rank();
  const Coord c = coord(r);
  // Every rank makes the same three calls in the same order: split is collective.
  Groups g;
  g.tp = world.split(tp_color(r), c.tp, group_name(ParallelDim::Tp, r));
  g.pp = world.split(pp_color(r), c.pp, group_name(ParallelDim::Pp, r));
  g.dp = world.split(dp_color(r), c.dp, group_name(ParallelDim::Dp, r));
  return g;
}

int Topology::world_rank(ParallelDim dim, int color, int group_rank) const {
  const int groups = world() / size(dim);
  SL_ENFORCE(color >= 0 && color < groups, "{} group {} out of range ({} groups)", dim_name(dim),
             color, groups);
  SL_ENFORCE(group_rank >= 0 && group_rank < size(dim), "rank {} out of range in a {} group of {}",
             group_rank, dim_name(dim), size(dim));
  switch (dim) {
    case ParallelDim::Tp:  // color = pp_i * dp + dp_i
      return color * tp_ + group_rank;
    case ParallelDim::Pp:  // color = dp_i * tp + tp_i
      return rank(Coord{group_rank, color % tp_, color / tp_});
    case ParallelDim::Dp:  // color = pp_i * tp + tp_i
      return rank(Coord{color / tp_, color % tp_, group_rank});
  }
  return -1;
}

int Topology::world_rank(const std::string& group, int group_rank) const {
  if (group == "world") return group_rank >= 0 && group_rank < world() ? group_rank : -1;
  for (ParallelDim dim : {ParallelDim::Tp, ParallelDim::Pp, ParallelDim::Dp}) {
    const std::string prefix = std::string(dim_name(dim)) + "[";
    if (group.rfind(prefix, 0) != 0 || group.back() != ']') continue;
    try {
      const int color = std::stoi(group.substr(prefix.size(), group.size() - prefix.size() - 1));
      return world_rank(dim, color, group_rank);
    } catch (const std::exception&) {
      return -1;
    }
  }
  return -1;
}

void check_model_fits(const Topology& topo, int64_t blocks, int64_t heads, int64_t width,
                      int64_t micro_batches, int64_t batch_size) {
  const int64_t tp = topo.tp(), pp = topo.pp(), dp = topo.dp();
  if (heads != 0) {
    SL_ENFORCE(heads % tp == 0, "parallel.tp: {} does not divide model.gpt.heads = {}", tp, heads);
    SL_ENFORCE(width % tp == 0, "parallel.tp: {} does not divide model.gpt.width = {}", tp, width);
  }
  SL_ENFORCE(blocks >= pp, "parallel.pp: {} stages but the model has {} blocks", pp, blocks);
  SL_ENFORCE(micro_batches >= 1, "parallel.micro_batches: must be >= 1, got {}", micro_batches);
  SL_ENFORCE(batch_size % dp == 0,
             "train.batch_size: {} is not divisible by parallel.dp = {} (the data-parallel "
             "replicas)",
             batch_size, dp);
  const int64_t per_replica = batch_size / dp;
  SL_ENFORCE(per_replica % micro_batches == 0,
             "parallel.micro_batches: {} does not divide the per-replica batch train.batch_size / "
             "parallel.dp = {} / {} = {}",
             micro_batches, batch_size, dp, per_replica);
}

}  // namespace shardlab
