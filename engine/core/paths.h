// Where ShardLab finds its own files at run time (job examples, the fallback text corpus, the
// icon), the same from a build tree and from an installed package.
#pragma once

#include <string>

namespace shardlab {

// The path of the running executable (/proc/self/exe); "" when it cannot be read.
std::string self_executable();

// The resources folder (holding jobs/ and corpus/), first that exists of:
//   1. $SHARDLAB_RESOURCE_DIR;
//   2. <executable's folder>/../share/shardlab (an installed package: /usr/bin -> /usr/share);
//   3. the source tree's resources/ (fixed at build time), for binaries run from a build tree.
// Returns the last one even when it does not exist (callers name it in their error).
std::string resource_dir();

}  // namespace shardlab
