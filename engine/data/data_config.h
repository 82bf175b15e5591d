// Dataset options; the job file's "data" object maps onto this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardlab {

struct DataConfig {
  // "fashion-mnist": Debian's dataset-fashion-mnist IDX files (gzip).
  // "chars": a character corpus (fortunes text files, or the fallback in resources/corpus).
  std::string dataset = "fashion-mnist";
  // fashion-mnist: directory with the four *-ubyte.gz files.
  std::string path = "/usr/share/datasets/fashion-mnist";
  // chars: text files or directories of them; empty means the fortunes package's files, falling
  // back to the corpus shipped in resources/corpus.
  std::vector<std::string> corpus;
  int64_t train_limit = 0;     // use only the first N training samples (0: all)
  int64_t eval_limit = 0;      // use only the first N evaluation samples (0: all)
  double eval_fraction = 0.1;  // chars: share of the text held out for evaluation (the tail)
  // (The data order is seeded by train.seed, where the sampler lives.)
};

}  // namespace shardlab
