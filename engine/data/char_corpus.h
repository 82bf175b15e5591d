// A character-level text corpus for the GPT model: raw bytes from text files, a byte-level
// vocabulary (the sorted set of byte values that occur) and a train/eval split of the text.
//
// The default corpus is the fortune cookie files of Debian's fortunes packages; where they are not
// installed, the original prose shipped in resources/corpus is used instead, so a "chars" job runs
// on any machine.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shardlab {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// resources/corpus (engine/core/paths.h resource_dir(): the build tree or the installed package).
std::string fallback_corpus_dir();

// Maps the byte values present in a text to dense ids 0..size()-1, in increasing byte order, so
// the ids of a given text do not depend on the order in which characters first appear.
class CharVocab {
 public:
  CharVocab() { ids_.fill(-1); }
  explicit CharVocab(std::string_view text);

  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  // id -> byte value.
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  bool contains(uint8_t byte) const { return ids_[byte] >= 0; }
  // Throws InvalidArgument for a byte that is not in the vocabulary.
  int32_t id(uint8_t byte) const;
  std::vector<int32_t> encode(std::string_view text) const;
  // Throws InvalidArgument for an id outside [0, size()).
  std::string decode(std::span<const int32_t> ids) const;

 private:
  std::vector<uint8_t> bytes_;
  std::array<int32_t, 256> ids_;  // byte -> id, -1 when absent
};

// Token ids of the two parts of a corpus: the head for training, the tail for evaluation.
struct CharSplit {
  std::vector<int32_t> train, eval;
};

class CharCorpus {
 public:
  // Reads and concatenates the given text files and directories, in the order given. A directory
  // contributes its plain files (not subdirectories, not symlinks, not hidden files, not the
  // fortune index files *.dat and the *.u8 links), sorted by name so the text is the same on every
  // machine. Lines consisting of a single "%" (the fortune separator) are dropped, and every file's
  // text ends with a newline. An empty list means load_default().
  // Throws IoError for a missing or unreadable path, FormatError when no text results.
  static CharCorpus load(const std::vector<std::string>& paths);
  // The fortunes files in fortunes_dir when it holds any, otherwise fallback_dir. Throws IoError
  // when neither exists.
  static CharCorpus load_default(const std::string& fortunes_dir = kFortunesDir,
                                 const std::string& fallback_dir = fallback_corpus_dir());
  // A corpus over the given text (FormatError when empty); source is used in describe().
  static CharCorpus from_text(std::string text, std::string source = "(text)");

  const std::string& text() const { return text_; }
  int64_t size() const { return static_cast<int64_t>(text_.size()); }
  // Vocabulary of the whole text, so that every evaluation character is encodable.
  const CharVocab& vocab() const { return vocab_; }
  // The files read, in order (empty for from_text).
  const std::vector<std::string>& files() const { return files_; }
  // One line for logs, e.g. "1.4 MB of text from 43 files in /usr/share/games/fortunes, 98
  // symbols".
  std::string describe() const;

  // Encodes the text and splits it: the first size() - round(size() * eval_fraction) characters for
  // training, the rest for evaluation. A contiguous tail, not random characters, so evaluation
  // windows never overlap training windows except at the one boundary. Throws InvalidArgument
  // unless 0 <= eval_fraction < 1.
  CharSplit split(double eval_fraction) const;

 private:
  std::string text_;
  CharVocab vocab_;
  std::vector<std::string> files_;
  std::string source_;
};

}  // namespace shardlab
