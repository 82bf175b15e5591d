// engine/optim/update_args.cpp for the fuzz build, unchanged: it is included below. Its
// run_cpu_update builds an Overloaded{lambda...} relying on C++20's class template argument
// deduction for aggregates, which GCC has and clang has only from version 17; for an older clang
// the deduction guide it needs is declared first. (The fuzzers never run an update: the
// optimizer registry, which job validation consults, names these functions.)
#include "engine/optim/update_args.h"

#if defined(__clang__) && __clang_major__ < 17
namespace shardlab {
template <class... F>
Overloaded(F...) -> Overloaded<F...>;
}  // namespace shardlab
#endif

#include "engine/optim/update_args.cpp"
