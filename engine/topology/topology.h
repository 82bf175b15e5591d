// Topology: the 3D layout of a job's ranks, pipeline (pp) x tensor (tp) x data (dp), Megatron
// style with the tensor-parallel ranks adjacent (they talk most, so they share a node first):
//
//   rank = (pp_i * dp + dp_i) * tp + tp_i          tp fastest, then dp, then pp
//
// pp = tp = dp = 2 on 8 ranks:
//
//   rank  0 1 2 3 4 5 6 7        tp groups  {0,1} {2,3} {4,5} {6,7}      tp[0] .. tp[3]
//   pp_i  0 0 0 0 1 1 1 1        pp groups  {0,4} {1,5} {2,6} {3,7}      pp[0] .. pp[3]
//   dp_i  0 0 1 1 0 0 1 1        dp groups  {0,2} {1,3} {4,6} {5,7}      dp[0] .. dp[3]
//   tp_i  0 1 0 1 0 1 0 1
//
// Every rank is in exactly one group per dimension; within a group, ranks are ordered by their
// coordinate along that dimension (so group rank == coordinate). A group's color (its index in
// the names above) is unique among the groups of its dimension. dp = -1 means world / (pp * tp).
// Layout errors (make) and model errors (check_model_fits) throw InvalidArgument naming the job
// field, e.g. "parallel.tp: 4 does not divide model.gpt.heads = 6".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

namespace shardlab {

struct TopologyConfig {
  int64_t pp = 1;   // pipeline stages, >= 1
  int64_t tp = 1;   // tensor-parallel ranks per group, >= 1
  int64_t dp = -1;  // data-parallel replicas, >= 1, or -1 for world / (pp * tp)
};

// A rank's position along each dimension.
struct Coord {
  int pp = 0, tp = 0, dp = 0;
  bool operator==(const Coord&) const = default;
};

enum class ParallelDim { Tp, Pp, Dp };
// "tp", "pp", "dp".
const char* dim_name(ParallelDim dim);

class Topology {
 public:
  // Validates and resolves `config` for `world` ranks (see the file comment); throws
  // InvalidArgument naming the broken rule and the field ("parallel.pp", "parallel.tp", ...).
  static Topology make(const TopologyConfig& config, int world);

  int world() const { return pp_ * tp_ * dp_; }
  int pp() const { return pp_; }
  int tp() const { return tp_; }
  int dp() const { return dp_; }
  // Extent of `dim` (pp(), tp() or dp()).
  int size(ParallelDim dim) const;

  // Both throw InvalidArgument when the rank or a coordinate is out of range.
  Coord coord(int rank) const;
  int rank(Coord c) const;

  // The ranks of `rank`'s group along a dimension, in group-rank (coordinate) order.
  std::vector<int> tp_group(int rank) const;
  std::vector<int> pp_group(int rank) const;
  std::vector<int> dp_group(int rank) const;
  std::vector<int> group(ParallelDim dim, int rank) const;

  // The group's index among the groups of its dimension, in [0, world / size(dim)):
  // tp_color = pp_i * dp + dp_i, pp_color = dp_i * tp + tp_i, dp_color = pp_i * tp + tp_i.
  int tp_color(int rank) const;
  int pp_color(int rank) const;
  int dp_color(int rank) const;
  int color(ParallelDim dim, int rank) const;
  // "tp[3]", "pp[1]", "dp[0]": the dimension and the group's color.
  std::string group_name(ParallelDim dim, int rank) const;
  // The world rank of member `group_rank` of group `color` along `dim` (the inverse of color()
  // and the coordinate). Throws InvalidArgument when either is out of range.
  int world_rank(ParallelDim dim, int color, int group_rank) const;
  // The world rank behind a communication record of a group built by build_groups(): group name
  // ("world", "tp[3]", ...) and rank within it; -1 for a name it did not build.
  int world_rank(const std::string& group, int group_rank) const;

  struct Groups {
    std::unique_ptr<Communicator> tp, pp, dp;
  };
  // Collective over `world` (whose size must equal world()): splits it three times, tp then pp
  // then dp, with key = the coordinate along that dimension, so each group's rank is the
  // coordinate.
  Groups build_groups(Communicator& world) const;

 private:
  Topology(int pp, int tp, int dp) : pp_(pp), tp_(tp), dp_(dp) {}
  void check_rank(int rank) const;

  int pp_ = 1, tp_ = 1, dp_ = 1;
};

// Checks a model against the layout: heads and width divisible by tp (heads = 0 skips both, for
// models without attention), at least one block per stage, micro_batches >= 1 and dividing the
// per-replica batch batch_size / dp (which must itself be whole). Throws InvalidArgument.
void check_model_fits(const Topology& topo, int64_t blocks, int64_t heads, int64_t width,
                      int64_t micro_batches, int64_t batch_size);

}  // namespace shardlab
