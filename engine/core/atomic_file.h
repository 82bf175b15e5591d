// Crash-safe file replacement: a reader sees either the old file or the complete new one, never
// a partial write, even when the process or the machine dies in between.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace shardlab {

// Writes `data` to "<path>.tmp.<pid>", fsyncs it, renames it over `path`, then fsyncs the
// directory so the rename itself is durable. Any failure throws IoError naming the path and the
// system's reason, and removes the temporary file. The directory must exist.
void write_file_atomic(const std::string& path, std::span<const uint8_t> data);
void write_file_atomic(const std::string& path, std::string_view text);

// fsync of a directory, making renames and removals inside it durable (IoError on failure).
void fsync_directory(const std::string& dir);

}  // namespace shardlab
