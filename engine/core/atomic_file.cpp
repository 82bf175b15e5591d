#include "engine/core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"

namespace shardlab {

namespace {

std::string reason(int err) {
  return std::strerror(err);
}

// Closes the descriptor and removes the temporary file unless release()d.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int& fd() { return fd_; }
  const std::string& path() const { return path_; }
  // Closes the descriptor; returns errno of a failed close, 0 otherwise.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
  int fd_ = -1;
};

std::string parent_of(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  SL_ENFORCE_T(IoError, fd >= 0, "{}: cannot open the directory to sync it ({})", dir,
               reason(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  SL_ENFORCE_T(IoError, rc == 0, "{}: cannot sync the directory ({})", dir, reason(err));
}

void write_file_atomic(const std::string& path, std::span<const uint8_t> data) {
  SL_ENFORCE(!path.empty(), "write_file_atomic: empty path");
  TempFile tmp(path + ".tmp." + std::to_string(::getpid()));
  tmp.fd() = ::open(tmp.path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp.fd() < 0) {
    const int err = errno;
    tmp.release();  // nothing was created (or it is not ours to remove)
    SL_THROW(IoError, "{}: cannot create {} ({})", path, tmp.path(), reason(err));
  }
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(tmp.fd(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    SL_ENFORCE_T(IoError, n > 0, "{}: write failed after {} of {} bytes ({})", path, done,
                 data.size(), reason(n < 0 ? errno : EIO));
    done += size_t(n);
  }
  SL_ENFORCE_T(IoError, ::fsync(tmp.fd()) == 0, "{}: fsync failed ({})", path, reason(errno));
  const int close_err = tmp.close();
  SL_ENFORCE_T(IoError, close_err == 0, "{}: close failed ({})", path, reason(close_err));
  SL_ENFORCE_T(IoError, ::rename(tmp.path().c_str(), path.c_str()) == 0,
               "{}: cannot rename {} over it ({})", path, tmp.path(), reason(errno));
  tmp.release();
  fsync_directory(parent_of(path));
}

void write_file_atomic(const std::string& path, std::string_view text) {
  write_file_atomic(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace shardlab
