// Character corpus: directory loading rules, vocabulary, split, CharDataset windows, the fallback
// corpus and load_datasets("chars").
#include <QtTest>

#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/data/char_corpus.h"
#include "engine/data/datasets.h"
#include "tests/data/data_test_util.h"

using namespace shardlab;
using namespace shardlab::testing;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

}  // namespace

class TestCharCorpus : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  fs::path root() const { return tmp_.path().toStdString(); }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  void loadsDirectoryLikeFortunes() {
    const fs::path d = root() / "fortunes";
    fs::create_directories(d / "off");
    // Written out of order: the corpus must come back sorted by name.
    write_text(d / "zebra", "last one\n%\n");
    write_text(d / "apple", "first\n%\nsecond line\nstill second\n%\nthird, no newline");
    write_text(d / "apple.dat", std::string("\0\0\0\2binary index", 16));
    fs::create_symlink("apple", d / "apple.u8");
    fs::create_symlink("zebra", d / "alias");  // symlinks are skipped even without .u8
    write_text(d / ".hidden", "hidden\n");
    write_text(d / "off" / "nested", "not read: subdirectories are skipped\n");
    write_text(d / "percent", "100%\n% not a separator\n%\r\n");

    const CharCorpus c = CharCorpus::load({d.string()});
    QCOMPARE(c.text(), std::string("first\nsecond line\nstill second\nthird, no newline\n"
                                   "100%\n% not a separator\nlast one\n"));
    QCOMPARE(c.files(), (std::vector<std::string>{(d / "apple").string(), (d / "percent").string(),
                                                  (d / "zebra").string()}));
    QVERIFY(QString::fromStdString(c.describe()).contains("3 files"));
  }

  void explicitFilesKeepTheirOrder() {
    const fs::path a = root() / "a.txt", b = root() / "b.txt";
    write_text(a, "aaa\n");
    write_text(b, "bbb");
    QCOMPARE(CharCorpus::load({b.string(), a.string()}).text(), std::string("bbb\naaa\n"));
  }

  void vocabularyRoundTrip() {
    const CharCorpus c = CharCorpus::from_text("hello, world\n");
    const CharVocab& v = c.vocab();
    // Sorted byte values, whatever order they first appear in.
    QCOMPARE(v.bytes(), (std::vector<uint8_t>{'\n', ' ', ',', 'd', 'e', 'h', 'l', 'o', 'r', 'w'}));
    QCOMPARE(v.size(), 10);
    const auto ids = v.encode("world, hello\n");
    QCOMPARE(ids.front(), 9);  // 'w' is the largest byte
    QCOMPARE(v.decode(ids), std::string("world, hello\n"));
    QCOMPARE(v.decode(c.vocab().encode(c.text())), c.text());
    QVERIFY(v.contains('h'));
    QVERIFY(!v.contains('z'));
    expect_error<InvalidArgument>([&] { v.encode("hello!"); }, {"0x21"});
    expect_error<InvalidArgument>([&] { v.decode(std::vector<int32_t>{10}); }, {"10"});
    expect_error<InvalidArgument>([&] { v.decode(std::vector<int32_t>{-1}); }, {"-1"});
  }

  void emptyOrMissing() {
    const fs::path empty = root() / "empty.txt";
    write_text(empty, "");
    expect_error<FormatError>([&] { CharCorpus::load({empty.string()}); }, {"empty"});
    const fs::path only_index = root() / "only-index";
    fs::create_directories(only_index);
    write_text(only_index / "x.dat", "index");
    expect_error<FormatError>([&] { CharCorpus::load({only_index.string()}); }, {"empty"});
    // Separator lines only: nothing left after dropping them.
    const fs::path seps = root() / "seps.txt";
    write_text(seps, "%\n%\n");
    expect_error<FormatError>([&] { CharCorpus::load({seps.string()}); }, {"empty"});
    expect_error<FormatError>([] { CharCorpus::from_text(""); }, {"empty"});
    const std::string missing = (root() / "missing.txt").string();
    expect_error<IoError>([&] { CharCorpus::load({missing}); },
                          {QString::fromStdString(missing), "not found"});
  }

  void splitSizes() {
    std::string text;
    for (int i = 0; i < 1000; ++i) text.push_back(static_cast<char>('a' + i % 26));
    const CharCorpus c = CharCorpus::from_text(text);
    const CharSplit s = c.split(0.1);
    QCOMPARE(s.train.size(), size_t(900));
    QCOMPARE(s.eval.size(), size_t(100));
    QCOMPARE(c.vocab().decode(s.train), text.substr(0, 900));
    QCOMPARE(c.vocab().decode(s.eval), text.substr(900));  // the tail, in order
    QCOMPARE(c.split(0.0).eval.size(), size_t(0));
    QCOMPARE(c.split(0.25).train.size(), size_t(750));
    expect_error<InvalidArgument>([&] { c.split(1.0); }, {"eval_fraction"});
    expect_error<InvalidArgument>([&] { c.split(-0.1); }, {"eval_fraction"});
  }

  void charWindows() {
    const fs::path f = root() / "windows.txt";
    std::string text;
    for (int i = 0; i < 50; ++i) text += "the quick brown fox " + std::to_string(i) + "\n";
    write_text(f, text);
    DataConfig cfg;
    cfg.dataset = "chars";
    cfg.corpus = {f.string()};
    cfg.eval_fraction = 0.2;
    const int64_t context = 8;
    const Datasets d = load_datasets(cfg, context);
    const auto* train = dynamic_cast<const CharDataset*>(d.train.get());
    const auto* eval = dynamic_cast<const CharDataset*>(d.eval.get());
    QVERIFY(train && eval);
    const int64_t n = static_cast<int64_t>(text.size());
    const int64_t n_eval = std::llround(n * 0.2);
    QCOMPARE(train->size(), n - n_eval - context);
    QCOMPARE(eval->size(), n_eval - context);
    QCOMPARE(train->num_classes(), CharVocab(text).size());
    QCOMPARE(eval->num_classes(), train->num_classes());
    QVERIFY(QString::fromStdString(d.description).startsWith("chars:"));

    const std::vector<int64_t> idx = {0, 5, train->size() - 1};
    Batch b;
    train->gather(idx, b);
    QCOMPARE(b.input.shape(), (Shape{3, context}));
    QCOMPARE(b.targets.size(), size_t(3 * context));
    for (size_t r = 0; r < idx.size(); ++r) {
      std::vector<int32_t> in(static_cast<size_t>(context)), tg(in.size());
      for (int64_t t = 0; t < context; ++t) {
        in[t] = static_cast<int32_t>(b.input[static_cast<int64_t>(r) * context + t]);
        tg[t] = b.targets[r * context + t];
      }
      const std::string window = text.substr(static_cast<size_t>(idx[r]), context + 1);
      QCOMPARE(train->decode(in), window.substr(0, context));
      QCOMPARE(train->decode(tg), window.substr(1));  // targets = inputs shifted by one
    }
    // The eval split starts where training text ends.
    eval->gather(std::vector<int64_t>{0}, b);
    std::vector<int32_t> first(static_cast<size_t>(context));
    for (int64_t t = 0; t < context; ++t) first[t] = static_cast<int32_t>(b.input[t]);
    QCOMPARE(eval->decode(first), text.substr(static_cast<size_t>(n - n_eval), context));
    expect_error<InvalidArgument>([&] { train->gather(std::vector<int64_t>{train->size()}, b); },
                                  {"outside"});

    cfg.train_limit = 10;
    cfg.eval_limit = 3;
    const Datasets limited = load_datasets(cfg, context);
    QCOMPARE(limited.train->size(), 10);
    QCOMPARE(limited.eval->size(), 3);
  }

  void charConfigErrors() {
    const fs::path f = root() / "small.txt";
    write_text(f, "just a few characters of text\n");
    DataConfig cfg;
    cfg.dataset = "chars";
    cfg.corpus = {f.string()};
    expect_error<InvalidArgument>([&] { load_datasets(cfg, 64); }, {"data.corpus", "context 64"});
    cfg.eval_fraction = 0.0;
    expect_error<InvalidArgument>([&] { load_datasets(cfg, 2); }, {"data.eval_fraction"});
    cfg.eval_fraction = 0.5;
    cfg.train_limit = -1;
    expect_error<InvalidArgument>([&] { load_datasets(cfg, 2); }, {"data.train_limit"});
    cfg.train_limit = 0;
    cfg.dataset = "imagenet";
    expect_error<InvalidArgument>([&] { load_datasets(cfg, 2); }, {"data.dataset", "imagenet"});
  }

  void fallbackCorpus() {
    const std::string nowhere = (root() / "no-fortunes-here").string();
    const CharCorpus c = CharCorpus::load_default(nowhere, fallback_corpus_dir());
    QVERIFY2(c.size() >= 20 * 1024, qPrintable(QString::number(c.size())));
    QCOMPARE(c.files().size(), size_t(1));
    QVERIFY(QString::fromStdString(c.files()[0]).endsWith("resources/corpus/fallback.txt"));
    QVERIFY(c.vocab().size() > 40);  // English prose: letters, digits, punctuation
    QVERIFY(c.vocab().size() < 100);
    // The fallback dir resolves to the source tree's resources/corpus.
    QVERIFY(
        fs::equivalent(fallback_corpus_dir(), fs::path(SHARDLAB_SOURCE_DIR) / "resources/corpus"));
    // An empty fortunes directory also falls back.
    fs::create_directories(root() / "empty-fortunes");
    QCOMPARE(CharCorpus::load_default((root() / "empty-fortunes").string(), fallback_corpus_dir())
                 .text(),
             c.text());
    expect_error<IoError>([&] { CharCorpus::load_default(nowhere, nowhere); },
                          {"fortunes", QString::fromStdString(nowhere)});
  }

  void defaultIsFortunesWhenInstalled() {
    if (!fs::is_directory(kFortunesDir)) QSKIP("fortunes not installed (apt-get install fortunes)");
    const CharCorpus c = CharCorpus::load({});
    QVERIFY(!c.files().empty());
    for (const std::string& f : c.files()) {
      QVERIFY2(!f.ends_with(".dat") && !f.ends_with(".u8"), f.c_str());
      QVERIFY(!fs::is_symlink(f));
    }
    QVERIFY(std::is_sorted(c.files().begin(), c.files().end()));
    QVERIFY(c.text().find("\n%\n") == std::string::npos);
    QVERIFY(c.size() > 100000);
  }
};

QTEST_APPLESS_MAIN(TestCharCorpus)
#include "tst_char_corpus.moc"
