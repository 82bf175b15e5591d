#include "net/recording.h"

#include <unistd.h>

#include <chrono>

#include <cerrno>
#include <cstring>
#include <span>

#include "engine/core/bytes.h"
#include "engine/core/error.h"

namespace shardlab::net {

namespace {

constexpr char kFileMagic[8] = {'S', 'L', 'R', 'E', 'C', '\0', '\0', '\0'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kFileHeaderSize = sizeof kFileMagic + sizeof(uint32_t);
constexpr uint32_t kBlockMagic = 0x314B4C42;  // bytes "BLK1"
constexpr size_t kBlockHeaderSize = 4 * sizeof(uint32_t);
// No writer produces a block this large (256 messages of at most a few hundred KiB each would
// take a pathological configuration); a length beyond it is a corrupt header, not a block that
// is still being written.
constexpr uint32_t kMaxBlockPayload = 1u << 30;

void put_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, sizeof v);
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

RecordingWriter::RecordingWriter(const std::string& path, size_t block_messages)
    : path_(path), block_messages_(block_messages == 0 ? 1 : block_messages) {
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr)
    SL_THROW(IoError, "cannot create recording {}: {}", path, std::strerror(errno));
  // Unbuffered: a block goes out in one fwrite of its own, and when a write fails nothing of it
  // stays in a stdio buffer to be written later after the cut (see flush()).
  std::setvbuf(file_, nullptr, _IONBF, 0);
  uint8_t header[kFileHeaderSize];
  std::memcpy(header, kFileMagic, sizeof kFileMagic);
  put_u32(header + sizeof kFileMagic, kFormatVersion);
  const bool ok =
      std::fwrite(header, 1, sizeof header, file_) == sizeof header && std::fflush(file_) == 0;
  if (!ok) {
    const int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    SL_THROW(IoError, "cannot write recording {}: {}", path, std::strerror(err));
  }
}

RecordingWriter::~RecordingWriter() {
  if (file_ == nullptr) return;
  try {
    flush();
  } catch (...) {
    // A destructor cannot report; the reader will see the recording end at the last whole block.
  }
  std::fclose(file_);
}

void RecordingWriter::append(const Message& message) {
  // The block header is reserved in front of the frames so a block goes out in one write.
  if (pending_.empty()) pending_.resize(kBlockHeaderSize);
  encode_into(message, pending_);
  ++pending_count_;
  ++messages_;
  // A full block, or one second since the last write: a reader (or a crash) loses at most that.
  if (pending_count_ >= block_messages_ ||
      std::chrono::steady_clock::now() - last_write_ >= std::chrono::seconds(1))
    flush();
}

void RecordingWriter::flush() {
  if (pending_count_ == 0) return;
  if (stopped_) {
    pending_.clear();
    pending_count_ = 0;
    SL_THROW(IoError, "recording {} stopped after a failed write", path_);
  }
  const size_t payload = pending_.size() - kBlockHeaderSize;
  SL_ENFORCE_T(IoError, payload <= kMaxBlockPayload,
               "recording {}: block of {} bytes exceeds the {}-byte limit", path_, payload,
               kMaxBlockPayload);
  uint8_t* h = pending_.data();
  put_u32(h, kBlockMagic);
  put_u32(h + 4, static_cast<uint32_t>(payload));
  put_u32(h + 8, pending_count_);
  put_u32(h + 12, crc32_of(pending_.data() + kBlockHeaderSize, payload));
  const long before = std::ftell(file_);
  const bool ok = std::fwrite(pending_.data(), 1, pending_.size(), file_) == pending_.size() &&
                  std::fflush(file_) == 0;
  const int err = errno;
  // The buffer is dropped either way: retrying a partly written block would duplicate messages.
  pending_.clear();
  pending_count_ = 0;
  last_write_ = std::chrono::steady_clock::now();
  if (!ok) {
    // Cut a partly written block off, so the blocks written later stay readable. When that is
    // impossible the recording stops here, whole up to its last good block, and says so.
    if (before < 0 || ftruncate(fileno(file_), before) != 0 ||
        std::fseek(file_, before, SEEK_SET) != 0)
      stopped_ = true;
    SL_THROW(IoError, "cannot write recording {}: {}{}", path_, std::strerror(err),
             stopped_ ? "; recording stopped (it ends at the last whole block)" : "");
  }
}

RecordingContents read_recording(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) SL_THROW(IoError, "cannot open recording {}: {}", path, std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0)
    bytes.insert(bytes.end(), chunk, chunk + n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) SL_THROW(IoError, "cannot read recording {}: {}", path, std::strerror(err));

  SL_ENFORCE_T(FormatError,
               bytes.size() >= kFileHeaderSize &&
                   std::memcmp(bytes.data(), kFileMagic, sizeof kFileMagic) == 0,
               "{} is not a ShardLab recording (bad file magic)", path);
  const uint32_t version = get_u32(bytes.data() + sizeof kFileMagic);
  SL_ENFORCE_T(FormatError, version == kFormatVersion,
               "{}: unsupported recording version {} (this build reads version {})", path, version,
               kFormatVersion);

  RecordingContents result;
  auto stop = [&](std::string note) {
    result.complete = false;
    result.note = std::move(note);
  };
  size_t off = kFileHeaderSize;
  while (off < bytes.size()) {
    if (bytes.size() - off < kBlockHeaderSize) {
      stop(fmt::format("incomplete block at byte {} (still being written, or the writer stopped)",
                       off));
      break;
    }
    const uint8_t* h = bytes.data() + off;
    const uint32_t magic = get_u32(h), payload = get_u32(h + 4), count = get_u32(h + 8),
                   crc = get_u32(h + 12);
    if (magic != kBlockMagic) {
      stop(fmt::format("corrupt block at byte {}: bad block magic {:#010x}", off, magic));
      break;
    }
    // Every frame has at least a header: a count the payload cannot hold is corrupt, and is
    // caught here, before it sizes an allocation.
    if (payload > kMaxBlockPayload || count == 0 || payload == 0 || count > payload / kHeaderSize) {
      stop(fmt::format("corrupt block at byte {}: implausible header ({} bytes, {} messages)", off,
                       payload, count));
      break;
    }
    if (bytes.size() - off - kBlockHeaderSize < payload) {
      stop(fmt::format("incomplete block at byte {} (still being written, or the writer stopped)",
                       off));
      break;
    }
    const std::span<const uint8_t> body(h + kBlockHeaderSize, payload);
    const uint32_t actual = crc32_of(body.data(), body.size());
    if (actual != crc) {
      stop(
          fmt::format("corrupt block at byte {}: checksum mismatch (stored {:#010x}, computed "
                      "{:#010x})",
                      off, crc, actual));
      break;
    }
    // A block is taken whole or not at all, so decode into a scratch list first.
    std::vector<Message> block;
    block.reserve(count);
    size_t pos = 0;
    std::string problem;
    for (uint32_t i = 0; i < count; ++i) {
      DecodeResult r = decode_frame(body.subspan(pos));
      if (r.status != DecodeResult::Status::ok) {
        problem =
            fmt::format("frame {} of {} at payload byte {} does not decode ({})", i + 1, count, pos,
                        r.status == DecodeResult::Status::error ? r.error : "truncated");
        break;
      }
      pos += r.consumed;
      block.push_back(std::move(r.message));
    }
    if (problem.empty() && pos != payload)
      problem = fmt::format("{} frames end at payload byte {} of {}", count, pos, payload);
    if (!problem.empty()) {
      stop(fmt::format("corrupt block at byte {}: {}", off, problem));
      break;
    }
    for (auto& m : block) result.messages.push_back(std::move(m));
    off += kBlockHeaderSize + payload;
  }
  return result;
}

}  // namespace shardlab::net
