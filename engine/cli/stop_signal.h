// Ctrl-C (SIGINT) and SIGTERM for a command that runs until it is stopped (monitor, replay on the
// web, bench web --serve): while a StopSignal lives, either signal only asks the command to stop,
// so it can close its sockets and keep its recording; release() (or the destructor) puts the
// default handlers back, so a second Ctrl-C during the shutdown ends the process at once. One at a
// time per process.
#pragma once

namespace shardlab::cli {

class StopSignal {
 public:
  StopSignal();  // clears an earlier request and installs the handlers
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  bool requested() const;
  void release();

 private:
  bool installed_ = true;
};

}  // namespace shardlab::cli
