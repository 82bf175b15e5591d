// Run recordings (.slrec): every HELLO and event a collector accepted, in arrival order, in an
// append-only file that can be read while it grows and, after a crash, up to its last whole block.
//
//   file   = "SLREC\0\0\0" (8 bytes), u32 format version (1), then blocks
//   block  = u32 magic 'BLK1' (0x314B4C42, bytes "BLK1"), u32 payload bytes, u32 message count, u32
//   CRC-32 of the payload,
//            payload = that many protocol frames (net/protocol.h encode())
//
// A block is written with one write() and flushed; a reader stops at the first block that is
// incomplete (a writer is still appending, or crashed mid-block) and says so, or at a block whose
// checksum or frames are wrong (corruption), naming the byte offset.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "net/protocol.h"

namespace shardlab::net {

class RecordingWriter {
 public:
  // Creates (truncates) `path`; throws IoError naming it when it cannot.
  explicit RecordingWriter(const std::string& path, size_t block_messages = 256);
  ~RecordingWriter();  // flushes
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;

  // Buffers a message; a full block, or the first message a second after the last write, is
  // written at once. Not thread-safe (one collector thread).
  void append(const Message& message);
  // Writes the buffered messages as a block (nothing when empty) and flushes the file. A failed
  // write throws IoError; the block is dropped and cut off the file, so later blocks stay
  // readable (when it cannot be cut, the recording stops there and every later flush throws).
  void flush();
  const std::string& path() const { return path_; }
  uint64_t messages() const { return messages_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  bool stopped_ = false;  // a failed write could not be cut off: nothing more is written
  size_t block_messages_;
  std::vector<uint8_t> pending_;
  std::chrono::steady_clock::time_point last_write_ = std::chrono::steady_clock::now();
  uint32_t pending_count_ = 0;
  uint64_t messages_ = 0;
};

struct RecordingContents {
  std::vector<Message> messages;  // every message of every whole, valid block
  bool complete = true;           // false: stopped early (see note)
  std::string note;  // why it stopped early: "incomplete block at byte 1234 (still being
                     // written, or the writer stopped)" or "corrupt block at byte ..."
};

// Reads a recording. Throws IoError when the file cannot be read and FormatError when it is not
// a recording (bad magic or version); a truncated or corrupt tail is reported in `note`.
RecordingContents read_recording(const std::string& path);

}  // namespace shardlab::net
