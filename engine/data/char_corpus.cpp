#include "engine/data/char_corpus.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/ranges.h>  // fmt::join (moved here from format.h in fmt 11)

#include "engine/core/error.h"
#include "engine/core/paths.h"

namespace shardlab {

namespace fs = std::filesystem;

std::string fallback_corpus_dir() {
  return resource_dir() + "/corpus";
}

// --- CharVocab ---

CharVocab::CharVocab(std::string_view text) {
  std::array<bool, 256> present{};
  for (char c : text) present[static_cast<uint8_t>(c)] = true;
  ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (!present[b]) continue;
    ids_[b] = static_cast<int32_t>(bytes_.size());
    bytes_.push_back(static_cast<uint8_t>(b));
  }
}

int32_t CharVocab::id(uint8_t byte) const {
  SL_ENFORCE(ids_[byte] >= 0, "character 0x{:02x} is not in the corpus vocabulary", byte);
  return ids_[byte];
}

std::vector<int32_t> CharVocab::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size());
  for (char c : text) out.push_back(id(static_cast<uint8_t>(c)));
  return out;
}

std::string CharVocab::decode(std::span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t i : ids) {
    SL_ENFORCE(i >= 0 && i < size(), "token id {} outside the vocabulary [0, {})", i, size());
    out.push_back(static_cast<char>(bytes_[static_cast<size_t>(i)]));
  }
  return out;
}

// --- CharCorpus ---

namespace {

// Appends a file's text to out, dropping fortune separator lines ("%" alone, also with a CR).
void append_file(const fs::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  SL_ENFORCE_T(IoError, in.good(), "cannot open corpus file {}", path.string());
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SL_ENFORCE_T(IoError, !in.bad(), "cannot read corpus file {}", path.string());

  size_t pos = 0;
  while (pos < raw.size()) {
    size_t end = raw.find('\n', pos);
    const bool has_newline = end != std::string::npos;
    if (!has_newline) end = raw.size();
    const std::string_view line(raw.data() + pos, end - pos);
    if (line != "%" && line != "%\r") {
      out.append(line);
      out.push_back('\n');  // also terminates a last line that had none
    }
    pos = end + 1;
  }
}

bool has_suffix(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The plain text files of a directory, sorted by name (see CharCorpus::load).
std::vector<fs::path> list_text_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  SL_ENFORCE_T(IoError, !ec, "cannot list corpus directory {}: {}", dir.string(), ec.message());
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    // symlink_status: the fortunes packages add name.u8 -> name links, which would duplicate text.
    if (!entry.is_symlink() && entry.is_regular_file() && !name.starts_with('.') &&
        !has_suffix(name, ".dat") && !has_suffix(name, ".u8")) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string format_size(int64_t bytes) {
  if (bytes >= 1000000) return fmt::format("{:.1f} MB", bytes / 1e6);
  if (bytes >= 1000) return fmt::format("{:.1f} KB", bytes / 1e3);
  return fmt::format("{} bytes", bytes);
}

}  // namespace

CharCorpus CharCorpus::load(const std::vector<std::string>& paths) {
  if (paths.empty()) return load_default();
  std::string text;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    SL_ENFORCE_T(IoError, fs::exists(st), "corpus path {} not found", p);
    const std::vector<fs::path> listed =
        fs::is_directory(st) ? list_text_files(p) : std::vector<fs::path>{fs::path(p)};
    for (const fs::path& f : listed) {
      append_file(f, text);
      files.push_back(f.string());
    }
  }
  SL_ENFORCE_T(FormatError, !text.empty(), "the character corpus is empty (read {} files from {})",
               files.size(), fmt::join(paths, ", "));

  CharCorpus c = from_text(std::move(text));
  c.files_ = std::move(files);
  c.source_ = paths.size() == 1 ? paths[0] : fmt::format("{} paths", paths.size());
  if (c.files_.size() > 1) c.source_ = fmt::format("{} files in {}", c.files_.size(), c.source_);
  return c;
}

CharCorpus CharCorpus::load_default(const std::string& fortunes_dir,
                                    const std::string& fallback_dir) {
  std::error_code ec;
  if (fs::is_directory(fortunes_dir, ec) && !list_text_files(fortunes_dir).empty()) {
    return load({fortunes_dir});
  }
  SL_ENFORCE_T(IoError, fs::is_directory(fallback_dir, ec),
               "no character corpus: neither the fortunes files ({}; `apt-get install fortunes`) "
               "nor the fallback corpus ({}) exist; set data.corpus",
               fortunes_dir, fallback_dir);
  return load({fallback_dir});
}

CharCorpus CharCorpus::from_text(std::string text, std::string source) {
  SL_ENFORCE_T(FormatError, !text.empty(), "the character corpus {} is empty", source);
  CharCorpus c;
  c.vocab_ = CharVocab(text);
  c.text_ = std::move(text);
  c.source_ = std::move(source);
  return c;
}

std::string CharCorpus::describe() const {
  return fmt::format("{} of text from {}, {} symbols", format_size(size()), source_, vocab_.size());
}

CharSplit CharCorpus::split(double eval_fraction) const {
  SL_ENFORCE(eval_fraction >= 0.0 && eval_fraction < 1.0, "eval_fraction must be in [0, 1), got {}",
             eval_fraction);
  const int64_t n = size();
  const int64_t n_eval = std::llround(static_cast<double>(n) * eval_fraction);
  const std::string_view all(text_);
  CharSplit out;
  out.train = vocab_.encode(all.substr(0, static_cast<size_t>(n - n_eval)));
  out.eval = vocab_.encode(all.substr(static_cast<size_t>(n - n_eval)));
  return out;
}

}  // namespace shardlab
