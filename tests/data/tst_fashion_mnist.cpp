// Fashion-MNIST: loader checks on small synthetic files (always run), and the installed dataset's
// sizes, class balance and normalisation constants (skipped when it is not installed).
#include <QtTest>

#include <cmath>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/data/datasets.h"
#include "engine/data/fashion_mnist.h"
#include "engine/data/sampler.h"
#include "tests/data/data_test_util.h"

using namespace shardlab;
using namespace shardlab::testing;
namespace fs = std::filesystem;

namespace {

bool installed() {
  return fs::is_directory(kFashionMnistDefaultDir);
}

// Writes a fake split: n images where image i has every pixel equal to 10 * i, label i % 10.
void write_fake_split(const fs::path& dir, const std::string& prefix, uint32_t n, uint32_t n_labels,
                      uint32_t cols = 28, uint8_t bad_label = 0) {
  std::vector<uint8_t> pixels;
  for (uint32_t i = 0; i < n; ++i) pixels.insert(pixels.end(), 28 * cols, uint8_t(10 * i));
  std::vector<uint8_t> labels;
  for (uint32_t i = 0; i < n_labels; ++i) labels.push_back(uint8_t(i % 10));
  if (bad_label) labels.back() = bad_label;
  write_gzip((dir / (prefix + "-images-idx3-ubyte.gz")).string(),
             concat(idx_header({n, 28, cols}), pixels));
  write_gzip((dir / (prefix + "-labels-idx1-ubyte.gz")).string(),
             concat(idx_header({n_labels}), labels));
}

}  // namespace

class TestFashionMnist : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  fs::path root() const { return tmp_.path().toStdString(); }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  void classNames() {
    const auto& names = fashion_mnist_class_names();
    QCOMPARE(names.size(), size_t(10));
    QCOMPARE(names[0], std::string_view("T-shirt/top"));
    QCOMPARE(names[9], std::string_view("Ankle boot"));
  }

  void syntheticFilesLoadAndGather() {
    const fs::path d = root() / "fake";
    fs::create_directories(d);
    write_fake_split(d, "train", 12, 12);
    write_fake_split(d, "t10k", 5, 5);
    DataConfig cfg;
    cfg.path = d.string();
    Datasets ds = load_datasets(cfg, 0);
    QCOMPARE(ds.train->size(), 12);
    QCOMPARE(ds.eval->size(), 5);
    QCOMPARE(ds.train->num_classes(), 10);
    QVERIFY(QString::fromStdString(ds.description).contains("12 train / 5 eval"));

    Batch b;
    ds.train->gather(std::vector<int64_t>{11, 3}, b);
    QCOMPARE(b.input.shape(), (Shape{2, 784}));
    QCOMPARE(b.targets, (std::vector<int32_t>{1, 3}));
    const float expect11 = (110.0f / 255.0f - 0.2860f) / 0.3530f;
    QCOMPARE(b.input[0], expect11);
    QCOMPARE(b.input[783], expect11);
    QCOMPARE(b.input[784], fashion_mnist_normalize(30));
    QVERIFY(std::abs(fashion_mnist_normalize(0) - (-0.2860f / 0.3530f)) < 1e-6f);
    expect_error<InvalidArgument>([&] { ds.train->gather(std::vector<int64_t>{12}, b); },
                                  {"outside"});

    cfg.train_limit = 4;
    cfg.eval_limit = 100;  // more than there are: all of them
    ds = load_datasets(cfg, 0);
    QCOMPARE(ds.train->size(), 4);
    QCOMPARE(ds.eval->size(), 5);
  }

  void malformedSplitsAreRejected() {
    const fs::path d = root() / "bad";
    fs::create_directories(d);
    write_fake_split(d, "train", 4, 3);
    expect_error<FormatError>([&] { load_fashion_mnist(d.string(), true); },
                              {"4 images", "3 labels"});
    write_fake_split(d, "train", 4, 4, 28, /*bad_label=*/10);
    expect_error<FormatError>([&] { load_fashion_mnist(d.string(), true); },
                              {"train-labels-idx1-ubyte.gz", "label 10"});
    write_fake_split(d, "train", 4, 4, 27);
    expect_error<FormatError>([&] { load_fashion_mnist(d.string(), true); },
                              {"train-images-idx3-ubyte.gz", "[4, 28, 27]"});
  }

  void missingFilesExplainTheFix() {
    const fs::path d = root() / "partial";
    fs::create_directories(d);
    write_fake_split(d, "train", 2, 2);
    fs::remove(d / "train-labels-idx1-ubyte.gz");
    expect_error<IoError>([&] { load_fashion_mnist(d.string(), true); },
                          {"train-labels-idx1-ubyte.gz", QString::fromStdString(d.string()),
                           "apt-get install dataset-fashion-mnist"});
    const std::string nowhere = (root() / "nowhere").string();
    DataConfig cfg;
    cfg.path = nowhere;
    expect_error<IoError>(
        [&] { load_datasets(cfg, 0); },
        {QString::fromStdString(nowhere), "apt-get install dataset-fashion-mnist"});
  }

  void installedDataset() {
    if (!installed()) QSKIP("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
    const FashionMnistSplit train = load_fashion_mnist(kFashionMnistDefaultDir, true);
    const FashionMnistSplit test = load_fashion_mnist(kFashionMnistDefaultDir, false);
    QCOMPARE(train.count, 60000);
    QCOMPARE(test.count, 10000);
    QCOMPARE(train.pixels.size(), size_t(60000 * 784));
    std::vector<int> train_hist(10), test_hist(10);
    for (uint8_t l : train.labels) ++train_hist[l];
    for (uint8_t l : test.labels) ++test_hist[l];
    QCOMPARE(train_hist, std::vector<int>(10, 6000));
    QCOMPARE(test_hist, std::vector<int>(10, 1000));

    // The constants in fashion_mnist.h are these statistics of the training pixels, rounded.
    double sum = 0, sq = 0;
    for (uint8_t p : train.pixels) {
      const double x = p / 255.0;
      sum += x;
      sq += x * x;
    }
    const double n = static_cast<double>(train.pixels.size());
    const double mean = sum / n, stddev = std::sqrt(sq / n - mean * mean);
    QVERIFY2(std::abs(mean - kFashionMnistMean) < 5e-4, qPrintable(QString::number(mean, 'f', 5)));
    QVERIFY2(std::abs(stddev - kFashionMnistStd) < 5e-4,
             qPrintable(QString::number(stddev, 'f', 5)));
  }

  void normalisedBatchesAreStandardised() {
    if (!installed()) QSKIP("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
    DataConfig cfg;
    cfg.train_limit = 0;
    const Datasets ds = load_datasets(cfg, 0);
    QCOMPARE(ds.train->size(), 60000);
    QCOMPARE(ds.eval->size(), 10000);
    QCOMPARE(ds.train->num_classes(), 10);
    // A shuffled subset of 2000 images: normalised pixels have mean ~0 and std ~1.
    Sampler sampler(ds.train->size(), {.batch_size = 2000, .seed = 3});
    Batch b;
    ds.train->gather(sampler.next(), b);
    double sum = 0, sq = 0;
    for (float v : b.input.span()) {
      sum += v;
      sq += double(v) * v;
    }
    const double n = static_cast<double>(b.input.numel());
    const double mean = sum / n, stddev = std::sqrt(sq / n - mean * mean);
    QVERIFY2(std::abs(mean) < 0.03, qPrintable(QString::number(mean)));
    QVERIFY2(std::abs(stddev - 1.0) < 0.03, qPrintable(QString::number(stddev)));
    for (int32_t t : b.targets) QVERIFY(t >= 0 && t < 10);
  }
};

QTEST_APPLESS_MAIN(TestFashionMnist)
#include "tst_fashion_mnist.moc"
