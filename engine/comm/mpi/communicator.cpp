// MpiCommunicator (communicator.h): construction over a Channel, destruction (which drains it),
// and split, a collective that makes the group's MPI communicator and its gate twin. The
// collectives are in collectives.cpp, send and recv in point_to_point.cpp, the queue and progress
// thread in channel.cpp.
#include "engine/comm/mpi/communicator.h"

#include <memory>
#include <string>

#include "engine/comm/mpi/channel.h"
#include "engine/comm/mpi/mpi_util.h"

namespace shardlab {
namespace mpi_detail {

std::unique_ptr<Communicator> adopt(MPI_Comm comm, MPI_Comm gate_comm, std::string name,
                                    CommOptions options) {
  auto channel = std::make_shared<Channel>(comm, gate_comm);
  return std::make_unique<MpiCommunicator>(std::move(channel), std::move(name), std::move(options));
}

}  // namespace mpi_detail

using mpi_detail::Op;

MpiCommunicator::MpiCommunicator(std::shared_ptr<mpi_detail::Channel> channel, std::string name,
                                 CommOptions options)
    : Communicator(channel->rank(), channel->size(), std::move(name), std::move(options)),
      channel_(std::move(channel)) {
  channel_->start(this);
}

MpiCommunicator::~MpiCommunicator() {
  channel_->shutdown();
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key,
                                                        const std::string& name) {
  // A collective on this communicator, so it goes through the queue and the gate like the others
  // (no CommOp, so no record). The gate's twin is made right after, while every member is
  // known to be there.
  auto op = std::make_shared<Op>();
  op->has_record = false;
  op->what = fmt::format("split of group {} into {}", this->name(), name);
  op->sig.op = mpi_detail::kSplitCode;
  struct Result {
    MPI_Comm comm = MPI_COMM_NULL, gate = MPI_COMM_NULL;
  };
  auto result = std::make_shared<Result>();
  op->body = [comm = channel_->comm(), result, color = color < 0 ? MPI_UNDEFINED : color,
              key](Op&) {
    SL_MPI_CHECK(MPI_Comm_split(comm, color, key, &result->comm));
    if (result->comm != MPI_COMM_NULL) SL_MPI_CHECK(MPI_Comm_dup(result->comm, &result->gate));
  };
  channel_->submit(op)->wait();
  if (result->comm == MPI_COMM_NULL) return nullptr;
  return mpi_detail::adopt(result->comm, result->gate, name, options());
}

}  // namespace shardlab
