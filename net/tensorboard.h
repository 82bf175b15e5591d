// TensorBoard event files from a recording: `shardlab export RUN.slrec --tensorboard DIR`, then
// `tensorboard --logdir DIR`.
//
// Layout: one run per rank, DIR/rank<N>/events.out.tfevents.<unix seconds>.<host>, with the same
// tags in every run. TensorBoard draws one chart per tag with one line per run, so the ranks of a
// tag share a chart (a slow rank's step time stands out against the others) and its run selector
// shows or hides ranks. (Tags like "loss/rank0" would give each rank a chart of its own, and
// comparing ranks would need a regex per chart.) <unix seconds> is the rank's first event's time
// (the export's for a rank with a HELLO only), so exporting the same recording twice writes the
// same files; an earlier export into DIR is replaced: every DIR/rank<N>/events.out.tfevents.* is
// removed before the new files are written (each under a temporary name, then renamed).
//
// Tags (scalars; the step is the rank's optimizer step):
//   train/loss  train/lr  train/grad_norm  train/throughput (samples/s, or tokens/s for a
//   language model)                                    one point per STEP event
//   time/step_seconds      the step's wall time as the rank measured it
//   time/compute_seconds   forward, backward and optimizer spans in the step
//   time/comm_seconds      all communication in the step: the known waits, the transfers and the
//                          operations whose wait the backend cannot know (nccl, send)
//   time/comm_wait_seconds of that, the time blocked waiting for the last rank of a group
//                          (the last three as net/time_accounting.h splits a step: `export
//                          --csv`'s compute_s, wait_s, and wait_s + transfer_s when no
//                          operation's wait is unknown)
//   eval/loss  eval/accuracy                           one point per EVAL event (its step)
//   memory/total_mib and memory/<category>_mib (params, grads, optimizer_state, activations,
//   comm)       the ledger's current bytes / 2^20 at each MEMORY event (sent after each step;
//               its step is the rank's last step, 0 before the first)
//
// The format, written here without TensorFlow (facts from TensorFlow's documentation and
// sources, named where used):
//   file    = records; the first holds Event{wall_time, file_version: "brain.Event:2"}
//   record  = u64 LE length, u32 LE masked CRC-32C of those 8 bytes, data, u32 LE masked CRC-32C
//             of data (TFRecord, tensorflow/core/lib/io/record_writer.cc and the TFRecord docs)
//   masked  = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (tensorflow/core/lib/hash/crc32c.h)
//   data    = a serialized tensorflow.Event (tensorflow/core/util/event.proto): wall_time = 1
//             (double), step = 2 (int64), file_version = 3 (string), summary = 5 (Summary);
//             Summary{repeated Value value = 1}, Value{tag = 1 (string), simple_value = 2 (float)}
//             (tensorflow/core/framework/summary.proto), in the protobuf wire format
//             (protobuf.dev/programming-guides/encoding).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/protocol.h"

namespace shardlab::net {

namespace tfevents {

// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF);
// crc32c("123456789") == 0xE3069283 (the catalogue's check value). Not zlib's crc32.
uint32_t crc32c(std::string_view bytes);
// TFRecord's mask of it: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(std::string_view bytes);

// Protobuf wire format, appended to `out`: a field's key is (number << 3) | wire type; varint
// (type 0) is 7 bits a byte, least significant first, the top bit set on all but the last
// (negative int64 as its two's complement, ten bytes); fixed64 (1) and fixed32 (5) little-endian;
// length-delimited (2) a varint length, then the bytes.
void append_varint(std::string& out, uint64_t value);
void append_double_field(std::string& out, int field, double value);
void append_float_field(std::string& out, int field, float value);
void append_int64_field(std::string& out, int field, int64_t value);
void append_bytes_field(std::string& out, int field, std::string_view bytes);

// One TFRecord: length, masked CRC of the length, data, masked CRC of the data.
std::string record(std::string_view data);

struct Scalar {
  std::string tag;
  float value = 0;
};

// A serialized Event: the file's first (file_version "brain.Event:2") and one of scalars (a
// Summary with a simple_value per scalar).
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars);

// "events.out.tfevents.<floor(wall_time)>.<host>" (the host name with characters other than
// letters, digits, '.', '-' and '_' replaced by '_').
std::string file_name(double wall_time, const std::string& host);

}  // namespace tfevents

struct TensorBoardExport {
  std::vector<std::string> files;  // one per rank, rank order
  uint64_t events = 0;             // scalar events written (file_version records not counted)
};

// Writes the event files of `messages` under `dir` (created when missing), one run per rank that
// has a HELLO or an event. Throws IoError when a folder or file cannot be made or written.
TensorBoardExport write_tensorboard(const std::vector<Message>& messages, const std::string& dir);

}  // namespace shardlab::net
