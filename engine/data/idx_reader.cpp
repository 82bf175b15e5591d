#include "engine/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <memory>

#include "engine/core/error.h"
#include "engine/device/tensor.h"

namespace shardlab {

int64_t IdxArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

namespace {

// zlib's gz* interface reads gzip and, transparently, plain files, so one code path serves both.
// It also walks across concatenated gzip members, which `gzip -c a b` produces.
struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto st = fs::status(path_, ec);
    SL_ENFORCE_T(IoError, fs::exists(st), "cannot open IDX file {}: no such file", path_);
    SL_ENFORCE_T(IoError, !fs::is_directory(st), "cannot open IDX file {}: it is a directory",
                 path_);
    file_.reset(gzopen(path_.c_str(), "rb"));
    SL_ENFORCE_T(IoError, file_ != nullptr, "cannot open IDX file {}", path_);
    gzbuffer(file_.get(), 1 << 17);  // fewer, larger reads: the default 8 KiB is slow for 47 MB
  }

  // Reads up to n bytes into dst and returns how many arrived; fewer than n means end of data.
  // Stream errors (corrupt or truncated gzip, read failures) throw.
  int64_t read(uint8_t* dst, int64_t n) {
    int64_t got = 0;
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - got, INT_MAX / 2));
      const int r = gzread(file_.get(), dst + got, chunk);
      if (r < 0) fail();
      if (r == 0) break;
      got += r;
    }
    // A gzip stream cut short reads as a short count with Z_BUF_ERROR set, not as -1.
    int errnum = Z_OK;
    gzerror(file_.get(), &errnum);
    if (errnum != Z_OK) fail();
    return got;
  }

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail() {
    int errnum = Z_OK;
    const char* msg = gzerror(file_.get(), &errnum);
    if (errnum == Z_ERRNO) SL_THROW(IoError, "cannot read IDX file {}", path_);
    SL_THROW(FormatError, "{}: corrupt gzip stream ({})", path_, msg ? msg : "unknown error");
  }

  std::string path_;
  GzFile file_;
};

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  Reader in(path);

  uint8_t magic[4];
  const int64_t got_magic = in.read(magic, 4);
  SL_ENFORCE_T(FormatError, got_magic == 4,
               "{}: truncated header: expected at least 4 bytes, got {}", path, got_magic);
  const uint32_t magic_value = be32(magic);
  SL_ENFORCE_T(FormatError, magic[0] == 0 && magic[1] == 0,
               "{}: bad magic 0x{:08x}: not an IDX file (expected 0x0000TTNN)", path, magic_value);
  SL_ENFORCE_T(FormatError, magic[2] == 0x08,
               "{}: bad magic 0x{:08x}: element type 0x{:02x} is not supported (only 0x08, "
               "unsigned byte)",
               path, magic_value, magic[2]);
  const int ndims = magic[3];
  SL_ENFORCE_T(FormatError, ndims >= 1 && ndims <= kIdxMaxDims,
               "{}: bad magic 0x{:08x}: {} dimensions (expected 1 to {})", path, magic_value, ndims,
               kIdxMaxDims);

  uint8_t dim_bytes[4 * kIdxMaxDims];
  const int64_t want_dims = 4 * ndims;
  const int64_t got_dims = in.read(dim_bytes, want_dims);
  SL_ENFORCE_T(FormatError, got_dims == want_dims,
               "{}: truncated header: expected {} bytes, got {}", path, 4 + want_dims,
               4 + got_dims);

  IdxArray out;
  int64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    const int64_t d = be32(dim_bytes + 4 * i);
    out.dims.push_back(d);
    // Checked one factor at a time: each is < 2^32 and total <= 2^30, so the product cannot
    // overflow int64 before the check.
    total *= d;
    SL_ENFORCE_T(FormatError, total <= kIdxMaxBytes,
                 "{}: header claims dims {} of more than {} bytes; refusing (corrupt header?)",
                 path, to_string(out.dims), kIdxMaxBytes);
  }

  // Grow the buffer as data arrives rather than trusting the header with one big allocation.
  constexpr int64_t kChunk = int64_t{1} << 22;
  out.data.reserve(static_cast<size_t>(std::min(total, kChunk)));
  int64_t got = 0;
  while (got < total) {
    const int64_t want = std::min(kChunk, total - got);
    out.data.resize(static_cast<size_t>(got + want));
    const int64_t r = in.read(out.data.data() + got, want);
    got += r;
    if (r < want) break;
  }
  SL_ENFORCE_T(FormatError, got == total,
               "{}: truncated data: dims {} need {} bytes, the file has {}", path,
               to_string(out.dims), total, got);

  // Anything after the data means the header and the payload disagree.
  uint8_t extra[4096];
  int64_t trailing = 0;
  for (int64_t r; (r = in.read(extra, sizeof extra)) > 0;) trailing += r;
  SL_ENFORCE_T(FormatError, trailing == 0,
               "{}: {} trailing bytes after the data: dims {} need {} bytes, the file has {}", path,
               trailing, to_string(out.dims), total, total + trailing);
  return out;
}

}  // namespace shardlab
