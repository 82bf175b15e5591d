// Job files: every validation rule names its field, JSON round trips, command-line overrides,
// malformed and missing files, and the example jobs in resources/jobs.
#include <QtTest>
#include <nlohmann/json.hpp>

#include <QDir>
#include <QTemporaryDir>

#include <algorithm>
#include <fstream>
#include <limits>

#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/job/job_spec.h"
#include "engine/job/overrides.h"

using namespace shardlab;
using nlohmann::json;

namespace {

const QString kJobs = QString(SHARDLAB_SOURCE_DIR) + "/resources/jobs/";

// A small valid job; each row of the data-driven tests patches it (RFC 7386 merge patch).
const char* kBase = R"({
  "name": "t",
  "model": {"kind": "mlp", "mlp": {"hidden": [256, 128]}},
  "data": {"dataset": "fashion-mnist"},
  "optimizer": {"name": "adam", "lr": 0.001},
  "train": {"steps": 100, "batch_size": 8, "eval_every": 50,
            "schedule": {"kind": "warmup_cosine", "warmup_steps": 10, "min_lr_ratio": 0.1}}
})";

// Turns the base job into a GPT job on the chars dataset.
const char* kGpt = R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars"}})";

json patched(const QString& patch) {
  json doc = json::parse(kBase);
  doc.merge_patch(json::parse(patch.toStdString()));
  return doc;
}

// The message job_from_json throws for `doc`, or "" when it accepts it.
QString rejection(const json& doc) {
  try {
    job_from_json(doc);
    return {};
  } catch (const InvalidArgument& e) {
    return QString::fromStdString(e.what());
  }
}

// `doc` with one --set style override applied.
[[maybe_unused]] json with_override(json doc, const std::string& assignment) {
  apply_override(doc, assignment);
  return doc;
}

// (type, message) of what `f` threw: "FormatError", "InvalidArgument", another ShardLab "Error",
// "std::exception" (e.g. the JSON library's own) or "" when it threw nothing.
template <class F>
std::pair<QString, QString> caught_error(F&& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return {"FormatError", e.what()};
  } catch (const InvalidArgument& e) {
    return {"InvalidArgument", e.what()};
  } catch (const Error& e) {
    return {"Error", e.what()};
  } catch (const std::exception& e) {
    return {"std::exception", e.what()};
  }
  return {};
}

// Fails the test unless load_job(path, sets) throws InvalidArgument with a message starting with
// `expected`.
void rejects(const std::string& path, const std::vector<std::string>& sets,
             const QString& expected) {
  try {
    load_job(path, sets);
    QFAIL("no exception");
  } catch (const InvalidArgument& e) {
    QVERIFY2(QString(e.what()).startsWith(expected), e.what());
  }
}

void write_file(const QString& path, const std::string& text) {
  std::ofstream out(path.toStdString(), std::ios::binary);
  out << text;
}

// Whether `msg` is one printable line: not empty, no C0 control character (what every error
// message must be whatever the file held; tests/fuzz/fuzz_common.h, check_message()).
bool one_printable_line(const QString& msg) {
  return !msg.isEmpty() &&
         std::none_of(msg.begin(), msg.end(), [](QChar c) { return c.unicode() < 0x20; });
}

// Counts the members of an aggregate (how many initialisers it accepts), so the tests notice a
// config field that the job schema does not know.
struct AnyValue {
  template <class T>
  operator T() const;  // only used unevaluated
};
template <class T, class... A>
constexpr size_t field_count() {
  if constexpr (requires { T{A{}..., AnyValue{}}; })
    return field_count<T, A..., AnyValue>();
  else
    return sizeof...(A);
}

}  // namespace

class TestJob : public QObject {
  Q_OBJECT
 private slots:
  void baseJobIsValid() {
    const QString msg = rejection(json::parse(kBase));
    QVERIFY2(msg.isEmpty(), qPrintable(msg));
    const QString gpt = rejection(patched(kGpt));
    QVERIFY2(gpt.isEmpty(), qPrintable(gpt));
  }

  // ---- rejected documents: the message starts with the field's dotted path ----

  void rejectsWithFieldPath_data() {
    QTest::addColumn<QString>("patch");
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("fragment");  // also expected in the message

    auto row = [](const char* tag, const char* patch, const char* field, const char* fragment) {
      QTest::newRow(tag) << QString(patch) << QString(field) << QString(fragment);
    };
    auto gpt_row = [](const char* tag, const char* gpt_fields, const char* field,
                      const char* fragment) {
      const QString patch = QString(R"({"model": {"kind": "gpt", "gpt": %1},
                                         "data": {"dataset": "chars"}})")
                                .arg(gpt_fields);
      QTest::newRow(tag) << patch << QString(field) << QString(fragment);
    };

    // Unknown keys, at every depth, with a suggestion when one is close.
    row("unknown top", R"({"optimiser": {}})", "optimiser", "did you mean \"optimizer\"");
    row("unknown optimizer", R"({"optimizer": {"lrr": 0.1}})", "optimizer.lrr",
        "unknown field (did you mean \"lr\"?)");
    row("unknown nested", R"({"model": {"mlp": {"hiden": [1]}}})", "model.mlp.hiden",
        "did you mean \"hidden\"");
    row("unknown schedule", R"({"train": {"schedule": {"warmup": 5}}})", "train.schedule.warmup",
        "unknown field");
    row("unknown far", R"({"data": {"zzz": 1}})", "data.zzz", "unknown field");

    // Wrong JSON types.
    row("steps string", R"({"train": {"steps": "many"}})", "train.steps",
        "expected an integer, got string");
    row("steps fraction", R"({"train": {"steps": 3.5}})", "train.steps",
        "expected an integer, got 3.5");
    row("steps bool", R"({"train": {"steps": true}})", "train.steps", "expected an integer");
    row("lr string", R"({"optimizer": {"lr": "fast"}})", "optimizer.lr", "expected a number");
    row("nesterov number", R"({"optimizer": {"nesterov": 1}})", "optimizer.nesterov",
        "expected true or false");
    row("name number", R"({"name": 7})", "name", "expected a string");
    row("kind array", R"({"model": {"kind": ["mlp"]}})", "model.kind", "expected a string");
    row("hidden not array", R"({"model": {"mlp": {"hidden": 256}}})", "model.mlp.hidden",
        "expected an array");
    row("hidden element", R"({"model": {"mlp": {"hidden": [256, "x"]}}})", "model.mlp.hidden[1]",
        "expected an integer");
    row("section not object", R"({"train": 5})", "train", "expected an object");
    row("nested not object", R"({"train": {"schedule": "constant"}})", "train.schedule",
        "expected an object");
    row("seed negative", R"({"model": {"seed": -1}})", "model.seed", "must be >= 0");
    row("limit string", R"({"data": {"train_limit": "1"}})", "data.train_limit", "expected a");
    row("corpus not strings", R"({"data": {"corpus": [1]}})", "data.corpus[0]",
        "expected a string");

    // Top-level values.
    row("name empty", R"({"name": ""})", "name", "must not be empty");

    // model
    row("model kind", R"({"model": {"kind": "cnn"}})", "model.kind", "must be one of");
    row("hidden zero", R"({"model": {"mlp": {"hidden": [256, 0]}}})", "model.mlp.hidden[1]",
        "must be >= 1, got 0");
    row("activation", R"({"model": {"mlp": {"activation": "tanh"}}})", "model.mlp.activation",
        "\"relu\", \"gelu\"");
    row("input_dim", R"({"model": {"mlp": {"input_dim": 100}}})", "model.mlp.input_dim", "784");
    row("num_classes", R"({"model": {"mlp": {"num_classes": 5}}})", "model.mlp.num_classes",
        "must be 10");
    row("gpt field with mlp", R"({"model": {"gpt": {"width": 128}}})", "model.gpt.width",
        "not used by model kind mlp");
    gpt_row("gpt width", R"({"width": 0})", "model.gpt.width", "must be >= 1");
    gpt_row("gpt heads", R"({"heads": 0})", "model.gpt.heads", "must be >= 1");
    gpt_row("gpt layers", R"({"layers": 0})", "model.gpt.layers", "must be >= 1");
    gpt_row("gpt context", R"({"context": 0})", "model.gpt.context", "must be >= 1");
    gpt_row("gpt mlp_ratio", R"({"mlp_ratio": 0})", "model.gpt.mlp_ratio", "must be >= 1");
    gpt_row("gpt vocab", R"({"vocab_size": -1})", "model.gpt.vocab_size", "must be >= 0");
    gpt_row("heads divide width", R"({"width": 64, "heads": 5})", "model.gpt.heads",
            "must divide model.gpt.width (64), got 5");
    row("mlp field with gpt",
        R"({"model": {"kind": "gpt", "mlp": {"hidden": [64]}}, "data": {"dataset": "chars"}})",
        "model.mlp.hidden", "not used by model kind gpt");

    // Model sizes that cannot be allocated, or that would overflow the layout math, are refused
    // by validation, naming the field, before anything allocates.
    row("hidden absurd", R"({"model": {"mlp": {"hidden": [4611686018427387904]}}})",
        "model.mlp.hidden[0]", "must be at most 16777216 (2^24), got 4611686018427387904");
    row("hidden parameters", R"({"model": {"mlp": {"hidden": [256, 9000000]}}})",
        "model.mlp.hidden[1]", "the model would have 2403200970 parameters");
    row("hidden parameters one layer", R"({"model": {"mlp": {"hidden": [3000000]}}})",
        "model.mlp.hidden[0]",
        "the model would have 2385000010 parameters, more than 2147483648 (2^31)");
    {
      QString many = "1";
      for (int i = 1; i < 5000; ++i) many += ", 1";
      QTest::newRow("hidden layers")
          << QString(R"({"model": {"mlp": {"hidden": [%1]}}})").arg(many)
          << QString("model.mlp.hidden") << QString("must hold at most 4096 layers, got 5000");
    }
    row("batch activations", R"({"train": {"batch_size": 1073741824}})", "train.batch_size",
        "of activations, more than");
    gpt_row("gpt width absurd", R"({"width": 33554432, "heads": 1})", "model.gpt.width",
            "must be at most 16777216 (2^24), got 33554432");
    gpt_row("gpt context absurd", R"({"context": 4611686018427387904})", "model.gpt.context",
            "must be at most 16777216 (2^24)");
    gpt_row("gpt vocab absurd", R"({"vocab_size": 100000000})", "model.gpt.vocab_size",
            "must be at most 16777216 (2^24)");
    gpt_row("gpt layers absurd", R"({"layers": 1000000})", "model.gpt.layers",
            "must be at most 4096, got 1000000");
    gpt_row("gpt mlp_ratio absurd", R"({"mlp_ratio": 1000000})", "model.gpt.mlp_ratio",
            "x model.gpt.width");
    gpt_row("gpt parameters", R"({"width": 16384, "heads": 4})", "model.gpt.width",
            "parameters, more than 2147483648 (2^31)");
    gpt_row("gpt attention activations", R"({"context": 1048576})", "model.gpt.context",
            "of activations, more than");

    // data
    row("dataset", R"({"data": {"dataset": "mnist"}})", "data.dataset", "must be one of");
    row("mlp needs fashion", R"({"data": {"dataset": "chars"}})", "data.dataset",
        "model kind mlp needs \"fashion-mnist\"");
    row("gpt needs chars", R"({"model": {"kind": "gpt"}})", "data.dataset",
        "model kind gpt needs \"chars\"");
    row("eval_fraction zero", R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars",
        "eval_fraction": 0}})",
        "data.eval_fraction", "must be in (0, 1)");
    row("eval_fraction one", R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars",
        "eval_fraction": 1}})",
        "data.eval_fraction", "must be in (0, 1)");
    row("eval_fraction unused", R"({"data": {"eval_fraction": 0.2}})", "data.eval_fraction",
        "not used by dataset fashion-mnist");
    row("corpus unused", R"({"data": {"corpus": ["a.txt"]}})", "data.corpus",
        "not used by dataset fashion-mnist");
    row("path unused", R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars",
        "path": "/tmp"}})",
        "data.path", "not used by dataset chars");
    row("path empty", R"({"data": {"path": ""}})", "data.path", "must not be empty");
    row("corpus empty entry", R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars",
        "corpus": [""]}})",
        "data.corpus[0]", "must not be empty");
    row("train_limit", R"({"data": {"train_limit": -1}})", "data.train_limit", "must be >= 0");
    row("eval_limit", R"({"data": {"eval_limit": -1}})", "data.eval_limit", "must be >= 0");

    // optimizer
    row("optimizer name", R"({"optimizer": {"name": "lion"}})", "optimizer.name", "sgd, adam");
    row("lr zero", R"({"optimizer": {"lr": 0}})", "optimizer.lr", "must be > 0, got 0");
    row("lr negative", R"({"optimizer": {"lr": -1}})", "optimizer.lr", "must be > 0, got -1");
    row("beta1 one", R"({"optimizer": {"beta1": 1}})", "optimizer.beta1", "must be in [0, 1)");
    row("beta1 negative", R"({"optimizer": {"beta1": -0.1}})", "optimizer.beta1", "[0, 1)");
    row("beta2 one", R"({"optimizer": {"beta2": 1.0}})", "optimizer.beta2", "[0, 1)");
    row("eps zero", R"({"optimizer": {"eps": 0}})", "optimizer.eps", "must be > 0");
    row("weight_decay", R"({"optimizer": {"weight_decay": -0.1}})", "optimizer.weight_decay",
        "must be >= 0");
    row("momentum with adam", R"({"optimizer": {"momentum": 0.9}})", "optimizer.momentum",
        "not used by adam");
    row("nesterov with adam", R"({"optimizer": {"nesterov": true}})", "optimizer.nesterov",
        "not used by adam");
    row("alpha with adamw", R"({"optimizer": {"name": "adamw", "alpha": 0.9}})", "optimizer.alpha",
        "not used by adamw");
    row("accumulator with adam", R"({"optimizer": {"initial_accumulator": 0.1}})",
        "optimizer.initial_accumulator", "not used by adam");
    row("beta1 with sgd", R"({"optimizer": {"name": "sgd", "beta1": 0.5}})", "optimizer.beta1",
        "not used by sgd");
    row("eps with sgd", R"({"optimizer": {"name": "sgd", "eps": 1e-6}})", "optimizer.eps",
        "not used by sgd");
    row("sgd momentum", R"({"optimizer": {"name": "sgd", "momentum": -0.5}})", "optimizer.momentum",
        "must be >= 0");
    row("nesterov no momentum", R"({"optimizer": {"name": "sgd", "nesterov": true}})",
        "optimizer.nesterov", "needs optimizer.momentum > 0");
    row("rmsprop alpha", R"({"optimizer": {"name": "rmsprop", "alpha": 1}})", "optimizer.alpha",
        "must be in [0, 1)");
    row("rmsprop beta2", R"({"optimizer": {"name": "rmsprop", "beta2": 0.9}})", "optimizer.beta2",
        "not used by rmsprop");
    row("adagrad accumulator", R"({"optimizer": {"name": "adagrad", "initial_accumulator": -1}})",
        "optimizer.initial_accumulator", "must be >= 0");

    // train
    row("batch_size", R"({"train": {"batch_size": 0}})", "train.batch_size", "must be >= 1");
    row("steps negative", R"({"train": {"steps": -1}})", "train.steps", "must be >= 0");
    row("epochs negative", R"({"train": {"steps": 0, "epochs": -1}})", "train.epochs",
        "must be >= 0");
    row("steps and epochs zero", R"({"train": {"steps": 0}})", "train.steps",
        "set train.steps or train.epochs");
    row("steps and epochs both", R"({"train": {"epochs": 2}})", "train.epochs",
        "not used when train.steps is set");
    row("log_every", R"({"train": {"log_every": 0}})", "train.log_every", "must be >= 1");
    row("eval_every", R"({"train": {"eval_every": -1}})", "train.eval_every", "must be >= 0");
    row("eval_batches", R"({"train": {"eval_batches": -1}})", "train.eval_batches", "must be >= 0");
    row("schedule kind", R"({"train": {"schedule": {"kind": "step"}}})", "train.schedule.kind",
        "\"constant\", \"warmup_cosine\"");
    row("warmup negative", R"({"train": {"schedule": {"warmup_steps": -1}}})",
        "train.schedule.warmup_steps", "must be >= 0");
    row("min_lr_ratio high", R"({"train": {"schedule": {"min_lr_ratio": 1.5}}})",
        "train.schedule.min_lr_ratio", "must be in [0, 1]");
    row("min_lr_ratio low", R"({"train": {"schedule": {"min_lr_ratio": -0.1}}})",
        "train.schedule.min_lr_ratio", "must be in [0, 1]");
    row("constant with warmup", R"({"train": {"schedule": {"kind": "constant",
        "min_lr_ratio": 0}}})",
        "train.schedule.warmup_steps", "not used by schedule constant");
    row("patience", R"({"train": {"early_stopping": {"patience": -1}}})",
        "train.early_stopping.patience", "must be >= 0");
    row("min_delta", R"({"train": {"early_stopping": {"patience": 2, "min_delta": -1}}})",
        "train.early_stopping.min_delta", "must be >= 0");
    row("min_delta unused", R"({"train": {"early_stopping": {"min_delta": 0.1}}})",
        "train.early_stopping.min_delta", "not used when patience is 0");
    row("patience needs evals",
        R"({"train": {"eval_every": 0, "early_stopping": {"patience": 2}}})",
        "train.early_stopping.patience", "needs train.eval_every > 0");
    row("accumulation zero", R"({"train": {"accumulation_steps": 0}})", "train.accumulation_steps",
        "must be in [1, 1024], got 0");
    row("accumulation high", R"({"train": {"accumulation_steps": 2048, "batch_size": 2048}})",
        "train.accumulation_steps", "must be in [1, 1024], got 2048");
    row("accumulation type", R"({"train": {"accumulation_steps": 1.5}})",
        "train.accumulation_steps", "expected an integer, got 1.5");
    row("clip negative", R"({"train": {"clip_grad_norm": -1}})", "train.clip_grad_norm",
        "must be a finite number >= 0 (0: no clipping), got -1");
    row("clip type", R"({"train": {"clip_grad_norm": "1"}})", "train.clip_grad_norm",
        "expected a number");
    row("checkpoint_every negative",
        R"({"train": {"checkpoint_dir": "ck", "checkpoint_every": -1},
            "parallel": {"strategy": "ddp"}})",
        "train.checkpoint_every", "must be >= 0, got -1");
    row("keep_checkpoints zero",
        R"({"train": {"checkpoint_dir": "ck", "keep_checkpoints": 0},
            "parallel": {"strategy": "ddp"}})",
        "train.keep_checkpoints", "must be >= 1, got 0");
    row("checkpoint_dir type", R"({"train": {"checkpoint_dir": 3}})", "train.checkpoint_dir",
        "expected a string");
    row("checkpoint_every without dir", R"({"train": {"checkpoint_every": 5}})",
        "train.checkpoint_every", "only used with train.checkpoint_dir");
    row("keep_checkpoints without dir", R"({"train": {"keep_checkpoints": 5}})",
        "train.keep_checkpoints", "only used with train.checkpoint_dir");
    row("checkpoints with strategy none", R"({"train": {"checkpoint_dir": "ck"}})",
        "train.checkpoint_dir", "need parallel.strategy ddp, zero1, zero2 or fsdp");
    row("batch not divisible by accumulation", R"({"train": {"accumulation_steps": 3}})",
        "train.batch_size",
        "must be divisible by parallel.world_size x train.accumulation_steps = 3, got 8");
    row("batch not divisible by ranks x accumulation",
        R"({"train": {"batch_size": 100, "accumulation_steps": 3},
            "parallel": {"strategy": "ddp", "world_size": 4}})",
        "train.batch_size",
        "must be divisible by parallel.world_size x train.accumulation_steps = 12, got 100");
    row("batch not divisible by ranks", R"({"parallel": {"strategy": "zero1", "world_size": 3}})",
        "train.batch_size", "= 3, got 8");

    // parallel
    row("unknown parallel key", R"({"parallel": {"world": 2}})", "parallel.world", "unknown field");
    row("parallel not object", R"({"parallel": "ddp"})", "parallel", "expected an object");
    row("strategy", R"({"parallel": {"strategy": "zero3"}})", "parallel.strategy",
        R"(must be one of "none", "ddp", "zero1", "zero2", "fsdp", got "zero3")");
    row("strategy type", R"({"parallel": {"strategy": 2}})", "parallel.strategy",
        "expected a string");
    row("world_size zero", R"({"parallel": {"strategy": "ddp", "world_size": 0}})",
        "parallel.world_size", "must be in [1, 1024], got 0");
    row("world_size huge", R"({"parallel": {"strategy": "ddp", "world_size": 2048}})",
        "parallel.world_size", "must be in [1, 1024], got 2048");
    row("world_size type", R"({"parallel": {"world_size": "4"}})", "parallel.world_size",
        "expected an integer");
    row("ranks need a strategy", R"({"parallel": {"world_size": 4}})", "parallel.world_size",
        "4 ranks need a strategy (ddp, zero1, zero2 or fsdp)");
    row("backend", R"({"parallel": {"strategy": "ddp", "backend": "nccl"}})", "parallel.backend",
        R"(must be one of "threads", "mpi", got "nccl")");
    row("backend with none", R"({"parallel": {"backend": "mpi"}})", "parallel.backend",
        "not used by strategy none");
    row("bucket_mb zero", R"({"parallel": {"strategy": "ddp", "bucket_mb": 0}})",
        "parallel.bucket_mb", "must be in (0, 4096] MiB, got 0");
    row("bucket_mb negative", R"({"parallel": {"strategy": "zero2", "bucket_mb": -1}})",
        "parallel.bucket_mb", "must be in (0, 4096] MiB, got -1");
    row("bucket_mb huge", R"({"parallel": {"strategy": "zero1", "bucket_mb": 5000}})",
        "parallel.bucket_mb", "must be in (0, 4096] MiB, got 5000");
    row("bucket_mb with none", R"({"parallel": {"bucket_mb": 8}})", "parallel.bucket_mb",
        "not used by strategy none");
    row("bucket_mb with fsdp", R"({"parallel": {"strategy": "fsdp", "bucket_mb": 8}})",
        "parallel.bucket_mb", "not used by strategy fsdp");
    row("overlap with none", R"({"parallel": {"overlap": false}})", "parallel.overlap",
        "not used by strategy none");
    row("keep_params with none", R"({"parallel": {"fsdp_keep_params": true}})",
        "parallel.fsdp_keep_params", "not used by strategy none");
    row("keep_params with zero2",
        R"({"parallel": {"strategy": "zero2", "world_size": 2, "fsdp_keep_params": true}})",
        "parallel.fsdp_keep_params", "not used by strategy zero2");
    row("keep_params type", R"({"parallel": {"fsdp_keep_params": 1}})", "parallel.fsdp_keep_params",
        "expected true or false");
    row("timeout with none", R"({"parallel": {"timeout_s": 5}})", "parallel.timeout_s",
        "not used by strategy none");
    row("timeout zero", R"({"parallel": {"strategy": "ddp", "timeout_s": 0}})",
        "parallel.timeout_s", "must be in (0, 86400] seconds, got 0");
    row("timeout huge", R"({"parallel": {"strategy": "fsdp", "timeout_s": 1e6}})",
        "parallel.timeout_s", "must be in (0, 86400] seconds, got 1000000");

    // parallel: the 3D layout (pp x tp x dp) and what tensor and pipeline parallelism need.
    // A GPT job (heads 4, width 64, layers 2: 4 blocks) on `ranks` ranks with a batch of 8.
    auto mp_row = [](const char* tag, const char* parallel, const char* field, const char* fragment,
                     const char* extra = "{}") {
      json patch = json::parse(kGpt);
      patch["parallel"] = json::parse(parallel);
      patch.merge_patch(json::parse(extra));
      QTest::newRow(tag) << QString::fromStdString(patch.dump()) << QString(field)
                         << QString(fragment);
    };
    mp_row("pp zero", R"({"strategy": "ddp", "world_size": 2, "pp": 0})", "parallel.pp",
           "must be >= 1, got 0");
    mp_row("tp zero", R"({"strategy": "ddp", "world_size": 2, "tp": 0})", "parallel.tp",
           "must be >= 1, got 0");
    mp_row("dp zero", R"({"strategy": "ddp", "world_size": 2, "dp": 0})", "parallel.dp",
           "must be >= 1 or -1");
    mp_row("dp -2", R"({"strategy": "ddp", "world_size": 2, "tp": 2, "dp": -2})", "parallel.dp",
           "got -2");
    mp_row("pp type", R"({"pp": 1.5})", "parallel.pp", "expected an integer, got 1.5");
    mp_row("schedule type", R"({"schedule": 1})", "parallel.schedule", "expected a string");
    mp_row("pp x tp x dp != world",
           R"({"strategy": "ddp", "world_size": 8, "pp": 2, "tp": 2, "dp": 3})", "parallel.dp",
           "pp x tp x dp = 2 x 2 x 3 = 12 does not equal the world size 8");
    mp_row("dp -1 needs pp x tp to divide the world",
           R"({"strategy": "ddp", "world_size": 6, "pp": 2, "tp": 2})", "parallel.dp",
           "needs pp x tp = 2 x 2 = 4 to divide the world size 6");
    mp_row("pp more than the world", R"({"strategy": "ddp", "world_size": 2, "pp": 4})",
           "parallel.pp", "4 stages are more than the world size 2");
    mp_row("explicit dp without model parallelism",
           R"({"strategy": "ddp", "world_size": 4, "dp": 2})", "parallel.dp",
           "= 2 does not equal the world size 4");
    mp_row("tp does not divide heads", R"({"strategy": "ddp", "world_size": 3, "tp": 3})",
           "parallel.tp", "3 does not divide model.gpt.heads = 4");
    mp_row("fewer blocks than stages", R"({"strategy": "ddp", "world_size": 8, "pp": 8})",
           "parallel.pp", "8 stages but the model has 4 blocks");
    mp_row("micro_batches do not divide the replica batch",
           R"({"strategy": "ddp", "world_size": 4, "pp": 2, "micro_batches": 3})",
           "parallel.micro_batches",
           "3 does not divide the per-replica batch train.batch_size / parallel.dp = 8 / 2 = 4");
    mp_row("batch not divisible by dp", R"({"strategy": "ddp", "world_size": 6, "tp": 2})",
           "train.batch_size", "8 is not divisible by parallel.dp = 3");
    mp_row("micro_batches zero", R"({"strategy": "ddp", "world_size": 2, "tp": 2,
           "micro_batches": 0})",
           "parallel.micro_batches", "must be >= 1, got 0");
    mp_row("mlp with tp", R"({"strategy": "ddp", "world_size": 2, "tp": 2})", "parallel.tp",
           "tensor parallelism needs model.kind gpt, got mlp",
           R"({"model": {"kind": "mlp"}, "data": {"dataset": "fashion-mnist"}})");
    mp_row("mlp with pp", R"({"strategy": "ddp", "world_size": 2, "pp": 2})", "parallel.pp",
           "pipeline parallelism needs model.kind gpt, got mlp",
           R"({"model": {"kind": "mlp"}, "data": {"dataset": "fashion-mnist"}})");
    mp_row("mlp with pp and tp", R"({"strategy": "ddp", "world_size": 4, "pp": 2, "tp": 2})",
           "parallel.tp", "tensor and pipeline parallelism need model.kind gpt, got mlp",
           R"({"model": {"kind": "mlp"}, "data": {"dataset": "fashion-mnist"}})");
    mp_row("fsdp with pp", R"({"strategy": "fsdp", "world_size": 2, "pp": 2})", "parallel.strategy",
           R"(must be "ddp", "zero1" or "zero2" with pipeline parallelism, got "fsdp")");
    mp_row("accumulation with tp", R"({"strategy": "ddp", "world_size": 2, "tp": 2})",
           "train.accumulation_steps",
           "must be 1 with tensor parallelism (use parallel.micro_batches), got 2",
           R"({"train": {"accumulation_steps": 2}})");
    mp_row("unknown schedule", R"({"strategy": "ddp", "world_size": 2, "pp": 2,
           "schedule": "zigzag"})",
           "parallel.schedule", R"(must be one of "gpipe", "1f1b", "interleaved", got "zigzag")");
    mp_row("interleaved without chunks", R"({"strategy": "ddp", "world_size": 2, "pp": 2,
           "micro_batches": 2, "schedule": "interleaved"})",
           "parallel.pp_chunks", "must be in [2, 64] with schedule interleaved");
    mp_row("interleaved micro_batches not a multiple of pp",
           R"({"strategy": "ddp", "world_size": 2, "pp": 2, "micro_batches": 1,
           "schedule": "interleaved", "pp_chunks": 2})",
           "parallel.micro_batches",
           "must be a multiple of parallel.pp = 2 with schedule interleaved");
    mp_row("interleaved with more virtual stages than blocks",
           R"({"strategy": "ddp", "world_size": 2, "pp": 2, "micro_batches": 2,
           "schedule": "interleaved", "pp_chunks": 3})",
           "parallel.pp_chunks",
           "2 stages of 3 chunks are 6 virtual stages, but the model has 4 blocks");
    mp_row("pp_chunks without interleaved", R"({"strategy": "ddp", "world_size": 2, "pp": 2,
           "pp_chunks": 2})",
           "parallel.pp_chunks", "not used without schedule interleaved");
    mp_row("unknown pp_partition", R"({"strategy": "ddp", "world_size": 2, "pp": 2,
           "pp_partition": "greedy"})",
           "parallel.pp_partition", R"(must be one of "uniform", "balanced", got "greedy")");
    mp_row("schedule unused with pp 1", R"({"strategy": "ddp", "world_size": 2,
           "schedule": "gpipe"})",
           "parallel.schedule", "not used without pipeline parallelism (parallel.pp is 1)");
    mp_row("pp_partition unused with tp only", R"({"strategy": "ddp", "world_size": 2, "tp": 2,
           "pp_partition": "balanced"})",
           "parallel.pp_partition", "not used without pipeline parallelism");
    mp_row("micro_batches unused", R"({"strategy": "ddp", "world_size": 2, "micro_batches": 2})",
           "parallel.micro_batches",
           "not used without tensor or pipeline parallelism (parallel.pp and parallel.tp are 1; "
           "use train.accumulation_steps)");
    row("unknown 3D key", R"({"parallel": {"ppp": 2}})", "parallel.ppp",
        "unknown field (did you mean \"pp\"?)");

#ifndef SHARDLAB_HAVE_MPI
    row("mpi unavailable", R"({"parallel": {"strategy": "ddp", "backend": "mpi"}})",
        "parallel.backend",
        "mpi is not available: this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
  }

  void rejectsWithFieldPath() {
    QFETCH(QString, patch);
    QFETCH(QString, field);
    QFETCH(QString, fragment);
    const json doc = patched(patch);
    const QString msg = rejection(doc);
    QVERIFY2(msg.startsWith(field + ": "), qPrintable("got: " + msg));
    QVERIFY2(msg.contains(fragment), qPrintable("got: " + msg));
    // The collected list agrees, so the GUI can put the message beside the field.
    const auto errors = check_job_json(doc);
    QVERIFY(!errors.empty());
    QCOMPARE(QString::fromStdString(errors.front().field), field);
  }

  // ---- accepted documents: boundaries and fields explicitly set to their defaults ----

  void accepts_data() {
    QTest::addColumn<QString>("patch");
    auto row = [](const char* tag, const char* patch) { QTest::newRow(tag) << QString(patch); };
    row("base", "{}");
    row("unused field at its default", R"({"optimizer": {"momentum": 0, "nesterov": false}})");
    row("sgd nesterov", R"({"optimizer": {"name": "sgd", "momentum": 0.9, "nesterov": true}})");
    row("rmsprop", R"({"optimizer": {"name": "rmsprop", "momentum": 0.9, "alpha": 0}})");
    row("adagrad", R"({"optimizer": {"name": "adagrad", "initial_accumulator": 0.1}})");
    row("adamw betas", R"({"optimizer": {"name": "adamw", "beta1": 0, "beta2": 0.95}})");
    row("epochs only", R"({"train": {"steps": 0, "epochs": 2}})");
    row("integer as 1e2", R"({"train": {"steps": 1e2}})");
    row("min_lr_ratio bounds", R"({"train": {"schedule": {"min_lr_ratio": 1}}})");
    row("warmup longer than the run", R"({"train": {"steps": 5}})");
    row("no warmup", R"({"train": {"schedule": {"warmup_steps": 0, "min_lr_ratio": 0}}})");
    row("constant", R"({"train": {"schedule": {"kind": "constant", "warmup_steps": 0,
        "min_lr_ratio": 0}}})");
    row("early stopping", R"({"train": {"early_stopping": {"patience": 3, "min_delta": 0.01}}})");
    row("linear classifier", R"({"model": {"mlp": {"hidden": []}}})");
    row("gelu", R"({"model": {"mlp": {"activation": "gelu"}}})");
    row("huge seed", R"({"model": {"seed": 18446744073709551615}})");
    row("gpt", kGpt);
    row("gpt corpus", R"({"model": {"kind": "gpt", "gpt": {"width": 96, "heads": 3}},
        "data": {"dataset": "chars", "corpus": ["/tmp/a.txt"], "eval_fraction": 0.5}})");
    row("limits", R"({"data": {"train_limit": 1000, "eval_limit": 100}})");
    row("accumulation", R"({"train": {"accumulation_steps": 8}})");
    row("accumulation max", R"({"train": {"accumulation_steps": 1024, "batch_size": 1024}})");
    row("clip", R"({"train": {"clip_grad_norm": 1.0}})");
    row("checkpoints", R"({"train": {"checkpoint_dir": "ck", "checkpoint_every": 0,
        "keep_checkpoints": 1}, "parallel": {"strategy": "zero2", "world_size": 2}})");
    row("checkpoint keys at their defaults", R"({"train": {"checkpoint_dir": "",
        "checkpoint_every": 0, "keep_checkpoints": 3}})");
    row("parallel defaults", R"({"parallel": {"strategy": "none", "world_size": 1,
        "backend": "threads", "bucket_mb": 4, "overlap": true, "fsdp_keep_params": false,
        "timeout_s": 60, "pp": 1, "tp": 1, "dp": -1, "micro_batches": 1, "schedule": "1f1b",
        "pp_partition": "uniform"}})");
    row("explicit dp", R"({"parallel": {"strategy": "ddp", "world_size": 4, "dp": 4}})");
    row("2x2x2 gpt", R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars"},
        "parallel": {"strategy": "zero2", "world_size": 8, "pp": 2, "tp": 2, "dp": 2,
        "micro_batches": 2, "schedule": "gpipe", "pp_partition": "balanced"}})");
    row("dp -1 resolves", R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars"},
        "parallel": {"strategy": "zero1", "world_size": 8, "pp": 2, "tp": 2, "dp": -1}})");
    row("pipeline only", R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars"},
        "parallel": {"strategy": "ddp", "world_size": 2, "pp": 2, "micro_batches": 8}})");
    row("tensor only with micro-batches", R"({"model": {"kind": "gpt"},
        "data": {"dataset": "chars"}, "parallel": {"strategy": "ddp", "world_size": 4, "tp": 4,
        "micro_batches": 4}})");
    row("one stage per block", R"({"model": {"kind": "gpt"}, "data": {"dataset": "chars"},
        "parallel": {"strategy": "ddp", "world_size": 4, "pp": 4}})");
    row("3D accumulation at its default", R"({"model": {"kind": "gpt"},
        "data": {"dataset": "chars"}, "train": {"accumulation_steps": 1},
        "parallel": {"strategy": "zero2", "world_size": 2, "tp": 2}})");
    row("3D batch not divisible by world x accumulation", R"({"model": {"kind": "gpt"},
        "data": {"dataset": "chars"}, "train": {"batch_size": 6},
        "parallel": {"strategy": "ddp", "world_size": 4, "pp": 2, "tp": 2}})");
    row("ddp", R"({"parallel": {"strategy": "ddp", "world_size": 4, "bucket_mb": 0.5,
        "overlap": false, "timeout_s": 86400}})");
    row("one rank ddp", R"({"parallel": {"strategy": "ddp"}})");
    row("zero1", R"({"parallel": {"strategy": "zero1", "world_size": 2, "bucket_mb": 4096}})");
    row("zero2 with accumulation",
        R"({"parallel": {"strategy": "zero2", "world_size": 2}, "train": {"batch_size": 8,
            "accumulation_steps": 4}})");
    row("fsdp keep params", R"({"parallel": {"strategy": "fsdp", "world_size": 8,
        "fsdp_keep_params": true, "overlap": false, "timeout_s": 0.5}})");
    row("max world size", R"({"parallel": {"strategy": "ddp", "world_size": 1024},
        "train": {"batch_size": 1024}})");
    // Large but real models stay below the size limits.
    row("hidden near the parameter limit", R"({"model": {"mlp": {"hidden": [2000000]}}})");
    row("gpt-2 medium sized", R"({"model": {"kind": "gpt", "gpt": {"width": 1024, "heads": 16,
        "layers": 24, "context": 1024}}, "data": {"dataset": "chars"}})");
#ifdef SHARDLAB_HAVE_MPI
    row("mpi", R"({"parallel": {"strategy": "ddp", "world_size": 2, "backend": "mpi"}})");
#endif
  }

  void accepts() {
    QFETCH(QString, patch);
    const QString msg = rejection(patched(patch));
    QVERIFY2(msg.isEmpty(), qPrintable(msg));
  }

  void readsValues() {
    const JobSpec job = job_from_json(patched(R"({"optimizer": {"name": "sgd", "lr": 0.25,
        "momentum": 0.9}, "train": {"steps": 3e3}, "model": {"mlp": {"hidden": [32]}}})"));
    QCOMPARE(job.name, std::string("t"));
    QCOMPARE(job.optimizer.name, std::string("sgd"));
    QCOMPARE(job.optimizer.lr, 0.25);
    QCOMPARE(job.optimizer.momentum, 0.9);
    QCOMPARE(job.train.steps, int64_t(3000));
    QCOMPARE(job.train.batch_size, int64_t(8));
    QCOMPARE(job.model.mlp.hidden, std::vector<int64_t>{32});
    QCOMPARE(job.train.schedule.kind, std::string("warmup_cosine"));
    // Missing fields keep the struct defaults.
    QCOMPARE(job.optimizer.eps, OptimizerConfig{}.eps);
    QCOMPARE(job.data.path, DataConfig{}.path);
    QCOMPARE(job.train.log_every, TrainConfig{}.log_every);
  }

  void notAnObject() {
    for (const char* text : {"[]", "3", "null", "\"job\""}) {
      const QString msg = rejection(json::parse(text));
      QVERIFY2(msg.startsWith("a job must be a JSON object"), qPrintable(msg));
    }
  }

  // The GUI shows every problem; the CLI prints the first with a count of the rest.
  void collectsAllErrors() {
    const json doc = patched(R"({"optimizer": {"lr": -1, "lrr": 2},
                                 "train": {"batch_size": 0, "steps": "x"}})");
    const auto errors = check_job_json(doc);
    QStringList fields;
    for (const auto& e : errors) fields << QString::fromStdString(e.field);
    // Unknown keys and types first, in document order; "train.steps" reports only its type (it
    // holds the default 0, which would otherwise also give "set train.steps or train.epochs").
    QCOMPARE(fields,
             QStringList({"optimizer.lrr", "train.steps", "optimizer.lr", "train.batch_size"}));
    QCOMPARE(errors[2].to_string(), std::string("optimizer.lr: must be > 0, got -1"));
    const QString msg = rejection(doc);
    QVERIFY2(msg.endsWith("(and 3 more problems)"), qPrintable(msg));
    QVERIFY(check_job_json(json::parse(kBase)).empty());
  }

  void validateTypedJob() {
    JobSpec job = job_from_json(json::parse(kBase));
    QVERIFY(validate(job).empty());
    job.optimizer.lr = 0;
    job.train.batch_size = 0;
    const auto errors = validate(job);
    QCOMPARE(errors.size(), size_t(2));
    QCOMPARE(errors[0].field, std::string("optimizer.lr"));
    QCOMPARE(errors[1].field, std::string("train.batch_size"));
  }

  // ---- writing ----

  void roundTrip() {
    JobSpec job;
    job.name = "round trip";
    job.model.kind = "gpt";
    job.model.seed = std::numeric_limits<uint64_t>::max();
    job.model.gpt = {
        .vocab_size = 97, .context = 32, .width = 48, .layers = 3, .heads = 6, .mlp_ratio = 2};
    job.data.dataset = "chars";
    job.data.path = DataConfig{}.path;
    job.data.corpus = {"/tmp/a.txt", "/tmp/b"};
    job.data.eval_fraction = 0.1 + 0.2;  // not exactly 0.3: doubles must survive exactly
    job.data.train_limit = 5000;
    job.optimizer.name = "rmsprop";
    job.optimizer.lr = 1.0 / 3.0;
    job.optimizer.momentum = 0.5;
    job.optimizer.alpha = 0.9;
    job.optimizer.eps = 1e-10;
    job.optimizer.weight_decay = 1e-4;
    job.train.steps = 0;
    job.train.epochs = 3;
    job.train.batch_size = 16;
    job.train.eval_every = 7;
    job.train.schedule = {.kind = "warmup_cosine", .warmup_steps = 5, .min_lr_ratio = 0.05};
    job.train.early_stopping = {.patience = 4, .min_delta = 0.001};
    QVERIFY(validate(job).empty());

    const json doc = job_to_json(job);
    const JobSpec back = job_from_json(doc);
    QVERIFY(back == job);
    QCOMPARE(back.data.eval_fraction, job.data.eval_fraction);
    QCOMPARE(back.model.seed, job.model.seed);
    QCOMPARE(back.data.corpus, job.data.corpus);
    QCOMPARE(back.optimizer.lr, job.optimizer.lr);
    // Through text as well.
    QVERIFY(job_from_json(json::parse(doc.dump())) == job);

    // operator== sees a change in any field.
    JobSpec other = back;
    other.train.early_stopping.min_delta = 0.002;
    QVERIFY(!(other == job));
  }

  void roundTripParallel() {
    JobSpec job = job_from_json(json::parse(kBase));
    job.train.batch_size = 48;
    job.train.accumulation_steps = 3;
    job.train.clip_grad_norm = 0.1 + 0.2;
    job.parallel.strategy = "fsdp";
    job.parallel.world_size = 4;
    job.parallel.backend = "threads";
    job.parallel.overlap = false;
    job.parallel.fsdp_keep_params = true;
    job.parallel.timeout_s = 1.0 / 3.0;
    QVERIFY(validate(job).empty());

    const json doc = job_to_json(job);
    QCOMPARE(doc["parallel"]["strategy"], json("fsdp"));
    QCOMPARE(doc["parallel"]["world_size"], json(4));
    QCOMPARE(doc["train"]["accumulation_steps"], json(3));
    for (const JobSpec& back : {job_from_json(doc), job_from_json(json::parse(doc.dump()))}) {
      QVERIFY(back == job);
      QCOMPARE(back.parallel.strategy, std::string("fsdp"));
      QCOMPARE(back.parallel.world_size, int64_t(4));
      QCOMPARE(back.parallel.backend, std::string("threads"));
      QCOMPARE(back.parallel.overlap, false);
      QCOMPARE(back.parallel.fsdp_keep_params, true);
      QCOMPARE(back.parallel.timeout_s, 1.0 / 3.0);
      QCOMPARE(back.train.accumulation_steps, int64_t(3));
      QCOMPARE(back.train.clip_grad_norm, 0.1 + 0.2);
    }

    // A ZeRO job with its own bucket size, through a file.
    job.parallel = {.strategy = "zero2", .world_size = 2, .bucket_mb = 0.25, .timeout_s = 30};
    QVERIFY(validate(job).empty());
    QTemporaryDir dir;
    const std::string path = dir.filePath("parallel.json").toStdString();
    save_job(job, path);
    const JobSpec loaded = load_job(path);
    QVERIFY(loaded == job);
    QCOMPARE(loaded.parallel.bucket_mb, 0.25);

    // operator== sees the parallel section.
    JobSpec other = loaded;
    other.parallel.overlap = !other.parallel.overlap;
    QVERIFY(!(other == job));

    // A document without "parallel" is a single-process job.
    const JobSpec plain = job_from_json(json::parse(kBase));
    QCOMPARE(plain.parallel.strategy, std::string("none"));
    QCOMPARE(plain.parallel.world_size, int64_t(1));
    QCOMPARE(plain.train.accumulation_steps, int64_t(1));
    QCOMPARE(plain.train.clip_grad_norm, 0.0);
  }

  // Every new rule reports through the typed validate() as well, in document order: train before
  // parallel, and the batch divisibility (a train field, decided by parallel) after both.
  void validateParallelOrder() {
    JobSpec job = job_from_json(json::parse(kBase));
    job.train.clip_grad_norm = std::numeric_limits<double>::quiet_NaN();
    job.parallel.strategy = "ddp";
    job.parallel.world_size = 3;
    job.parallel.timeout_s = -1;
    const auto errors = validate(job);
    QStringList got;
    for (const auto& e : errors) got << QString::fromStdString(e.to_string());
    QCOMPARE(got.size(), 3);
    QCOMPARE(got[0], QString("train.clip_grad_norm: must be a finite number >= 0 (0: no "
                             "clipping), got nan"));
    QCOMPARE(got[1], QString("parallel.timeout_s: must be in (0, 86400] seconds, got -1"));
    QCOMPARE(got[2], QString("train.batch_size: must be divisible by parallel.world_size x "
                             "train.accumulation_steps = 3, got 8"));
  }

  // The checkpoint keys: written, read back, set with --set, and refused when out of range.
  void checkpointKeys() {
    JobSpec job = job_from_json(json::parse(kBase));
    job.parallel.strategy = "zero1";
    job.parallel.world_size = 2;
    job.train.checkpoint_dir = "runs/ck";
    job.train.checkpoint_every = 25;
    job.train.keep_checkpoints = 1;
    QVERIFY(validate(job).empty());
    const json doc = job_to_json(job);
    QCOMPARE(doc["train"]["checkpoint_dir"], json("runs/ck"));
    QCOMPARE(doc["train"]["checkpoint_every"], json(25));
    QCOMPARE(doc["train"]["keep_checkpoints"], json(1));
    QVERIFY(job_from_json(json::parse(doc.dump())) == job);

    const JobSpec plain = job_from_json(json::parse(kBase));
    QCOMPARE(plain.train.checkpoint_dir, std::string());
    QCOMPARE(plain.train.checkpoint_every, int64_t(0));
    QCOMPARE(plain.train.keep_checkpoints, int64_t(3));

    QTemporaryDir dir;
    const std::string path = dir.filePath("ck.json").toStdString();
    write_file(QString::fromStdString(path), kBase);
    const JobSpec set = load_job(
        path, {"parallel.strategy=ddp", "parallel.world_size=2", "train.checkpoint_dir=/tmp/ck dir",
               "train.checkpoint_every=4", "train.keep_checkpoints=2"});
    QCOMPARE(set.train.checkpoint_dir, std::string("/tmp/ck dir"));
    QCOMPARE(set.train.checkpoint_every, int64_t(4));
    QCOMPARE(set.train.keep_checkpoints, int64_t(2));
    try {
      (void)load_job(
          path, {"parallel.strategy=ddp", "train.checkpoint_dir=ck", "train.keep_checkpoints=0"});
      QFAIL("keep_checkpoints 0 accepted");
    } catch (const InvalidArgument& e) {
      QVERIFY2(QString(e.what()).startsWith("train.keep_checkpoints: must be >= 1"), e.what());
    }
  }

  void roundTripModelParallel() {
    JobSpec job = job_from_json(patched(kGpt));
    job.parallel.strategy = "zero2";
    job.parallel.world_size = 8;
    job.parallel.pp = 2;
    job.parallel.tp = 2;
    job.parallel.dp = 2;
    job.parallel.micro_batches = 4;
    job.parallel.schedule = "gpipe";
    job.parallel.pp_partition = "balanced";
    QVERIFY(validate(job).empty());

    const json doc = job_to_json(job);
    QCOMPARE(doc["parallel"]["pp"], json(2));
    QCOMPARE(doc["parallel"]["tp"], json(2));
    QCOMPARE(doc["parallel"]["dp"], json(2));
    QCOMPARE(doc["parallel"]["micro_batches"], json(4));
    QCOMPARE(doc["parallel"]["schedule"], json("gpipe"));
    QCOMPARE(doc["parallel"]["pp_partition"], json("balanced"));
    for (const JobSpec& back : {job_from_json(doc), job_from_json(json::parse(doc.dump()))}) {
      QVERIFY(back == job);
      QCOMPARE(back.parallel.pp, int64_t(2));
      QCOMPARE(back.parallel.tp, int64_t(2));
      QCOMPARE(back.parallel.dp, int64_t(2));
      QCOMPARE(back.parallel.micro_batches, int64_t(4));
      QCOMPARE(back.parallel.schedule, std::string("gpipe"));
      QCOMPARE(back.parallel.pp_partition, std::string("balanced"));
    }

    // Through a file, with dp left to resolve.
    job.parallel.dp = -1;
    QVERIFY(validate(job).empty());
    QTemporaryDir dir;
    const std::string path = dir.filePath("3d.json").toStdString();
    save_job(job, path);
    const JobSpec loaded = load_job(path);
    QVERIFY(loaded == job);
    QCOMPARE(loaded.parallel.dp, int64_t(-1));

    // operator== sees each new field.
    for (auto change : std::vector<void (*)(ParallelConfig&)>{
             [](ParallelConfig& p) { p.pp = 4; }, [](ParallelConfig& p) { p.tp = 1; },
             [](ParallelConfig& p) { p.dp = 2; }, [](ParallelConfig& p) { p.micro_batches = 1; },
             [](ParallelConfig& p) { p.schedule = "1f1b"; },
             [](ParallelConfig& p) { p.pp_chunks = 3; },
             [](ParallelConfig& p) { p.pp_partition = "uniform"; }}) {
      JobSpec other = loaded;
      change(other.parallel);
      QVERIFY(!(other == job));
    }

    // A document without the new keys is a plain data-parallel (or single-process) job.
    const ParallelConfig plain = job_from_json(json::parse(kBase)).parallel;
    QCOMPARE(plain.pp, int64_t(1));
    QCOMPARE(plain.tp, int64_t(1));
    QCOMPARE(plain.dp, int64_t(-1));
    QCOMPARE(plain.micro_batches, int64_t(1));
    QCOMPARE(plain.schedule, std::string("1f1b"));
    QCOMPARE(plain.pp_chunks, int64_t(1));
    QCOMPARE(plain.pp_partition, std::string("uniform"));
    QVERIFY(!uses_model_parallelism(plain));
  }

  // Every 3D rule is collected alongside the others, in document order, each under its field.
  void validateModelParallelCollects() {
    JobSpec job = job_from_json(json::parse(kBase));  // an mlp job
    job.train.accumulation_steps = 2;
    job.parallel.strategy = "fsdp";
    job.parallel.world_size = 4;
    job.parallel.pp = 2;
    job.parallel.tp = 2;
    job.parallel.schedule = "zigzag";
    QStringList got;
    for (const auto& e : validate(job)) got << QString::fromStdString(e.field);
    QCOMPARE(got, QStringList({"parallel.schedule", "parallel.tp", "parallel.strategy",
                               "train.accumulation_steps"}));

    // "none" is refused like fsdp: the strategy names the data-parallel dimension's strategy.
    JobSpec single = job_from_json(patched(kGpt));
    single.parallel.pp = 1;
    single.parallel.tp = 2;
    single.parallel.world_size = 2;
    bool strategy_reported = false;
    for (const auto& e : validate(single)) {
      if (e.field != "parallel.strategy") continue;
      strategy_reported = true;
      QVERIFY2(QString::fromStdString(e.message).contains("data-parallel dimension"),
               e.message.c_str());
      QVERIFY2(QString::fromStdString(e.message).contains("got \"none\""), e.message.c_str());
    }
    QVERIFY(strategy_reported);

    // The data-parallel batch rule (world_size x accumulation_steps) does not apply to a 3D job;
    // its own (dp x micro_batches) does.
    JobSpec hybrid = job_from_json(patched(kGpt));
    hybrid.train.batch_size = 6;
    hybrid.parallel.strategy = "ddp";
    hybrid.parallel.world_size = 4;
    hybrid.parallel.tp = 2;
    QVERIFY(validate(hybrid).empty());  // dp = 2, 3 samples per replica
    hybrid.parallel.micro_batches = 2;
    const auto errors = validate(hybrid);
    QCOMPARE(errors.size(), size_t(1));
    QCOMPARE(errors[0].field, std::string("parallel.micro_batches"));
  }

  // The written document holds every field of every config struct.
  void writesEveryField() {
    const json doc = job_to_json(JobSpec{});
    QCOMPARE(doc.size(), field_count<JobSpec>());
    QCOMPARE(doc["model"].size(), field_count<ModelConfig>());
    QCOMPARE(doc["model"]["mlp"].size(), field_count<MlpConfig>());
    QCOMPARE(doc["model"]["gpt"].size(), field_count<GptConfig>());
    QCOMPARE(doc["data"].size(), field_count<DataConfig>());
    QCOMPARE(doc["optimizer"].size(), field_count<OptimizerConfig>());
    QCOMPARE(doc["train"].size(), field_count<TrainConfig>());
    QCOMPARE(doc["train"]["schedule"].size(), field_count<ScheduleConfig>());
    QCOMPARE(doc["train"]["early_stopping"].size(), field_count<EarlyStoppingConfig>());
    QCOMPARE(doc["parallel"].size(), field_count<ParallelConfig>());
    QCOMPARE(field_count<ParallelConfig>(), size_t(14));
    QCOMPARE(doc["telemetry"].size(), field_count<TelemetryConfig>());
    QCOMPARE(field_count<JobSpec>(), size_t(8));
    QVERIFY(doc["device"] == json("cpu"));
    QVERIFY(doc["train"]["accumulation_steps"] == json(1));
    QVERIFY(doc["train"]["clip_grad_norm"] == json(0.0));
    QVERIFY(doc["parallel"]["strategy"] == json("none"));
    QCOMPARE(field_count<OptimizerConfig>(), size_t(10));  // the counter itself works
    QVERIFY(doc["optimizer"]["momentum"] == json(0.0));
    QVERIFY(doc["data"]["corpus"] == json::array());
  }

  // "device": cpu (the default), cuda or test; anything else is refused naming the field.
  void deviceField() {
    JobSpec job = job_from_json(patched(R"({"device": "cuda"})"));
    QCOMPARE(QString::fromStdString(job.device), QString("cuda"));
    QVERIFY(validate(job).empty());
    job.device = "tpu";
    const auto errors = validate(job);
    QCOMPARE(errors.size(), size_t(1));
    QCOMPARE(errors[0].field, std::string("device"));
    QVERIFY2(QString::fromStdString(errors[0].message).contains("\"cpu\", \"cuda\""),
             errors[0].message.c_str());
  }

  void telemetrySection() {
    JobSpec job = job_from_json(patched(R"({"telemetry": {"address": "127.0.0.1:7070"}})"));
    QCOMPARE(QString::fromStdString(job.telemetry.address), QString("127.0.0.1:7070"));
    QVERIFY(validate(job).empty());
    for (const char* bad : {"127.0.0.1", "host:0", "host:65536", ":7070", "host:70a0"}) {
      job.telemetry.address = bad;
      const auto errors = validate(job);
      QVERIFY2(errors.size() == 1 && errors[0].field == "telemetry.address", bad);
    }
    job.telemetry.address.clear();
    job.telemetry.token_file = "t.token";
    const auto errors = validate(job);
    QVERIFY(errors.size() == 1 && errors[0].field == "telemetry.token_file");
  }

  void saveAndLoad() {
    QTemporaryDir dir;
    const QString path = dir.filePath("job.json");
    JobSpec job = job_from_json(patched(R"({"optimizer": {"name": "adamw", "beta2": 0.95}})"));
    save_job(job, path.toStdString());
    QVERIFY(load_job(path.toStdString()) == job);
    // Saved in document order, not alphabetically: "name" comes first.
    std::ifstream in(path.toStdString());
    std::string first, second;
    std::getline(in, first);
    std::getline(in, second);
    QCOMPARE(QString::fromStdString(second).trimmed(), QString("\"name\": \"t\","));
    QVERIFY_THROWS_EXCEPTION(IoError,
                             save_job(job, dir.filePath("no/such/dir/job.json").toStdString()));
  }

  // ---- overrides ----

  void overrides_data() {
    QTest::addColumn<QStringList>("assignments");
    QTest::addColumn<QString>("expected");  // the document after applying them to {"name": "t"}
    auto row = [](const char* tag, QStringList a, const char* expected) {
      QTest::newRow(tag) << a << QString(expected);
    };
    row("number", {"optimizer.lr=0.01"}, R"({"name": "t", "optimizer": {"lr": 0.01}})");
    row("exponent", {"optimizer.lr=1e-3"}, R"({"name": "t", "optimizer": {"lr": 0.001}})");
    row("integer", {"train.steps=10"}, R"({"name": "t", "train": {"steps": 10}})");
    row("negative", {"train.steps=-4"}, R"({"name": "t", "train": {"steps": -4}})");
    row("bool", {"optimizer.nesterov=true"}, R"({"name": "t", "optimizer": {"nesterov": true}})");
    row("bare string", {"optimizer.name=sgd"}, R"({"name": "t", "optimizer": {"name": "sgd"}})");
    row("quoted string", {"optimizer.name=\"sgd\""},
        R"({"name": "t", "optimizer": {"name": "sgd"}})");
    row("path string", {"data.path=/data/fm"}, R"({"name": "t", "data": {"path": "/data/fm"}})");
    row("array", {"model.mlp.hidden=[128,64]"},
        R"({"name": "t", "model": {"mlp": {"hidden": [128, 64]}}})");
    row("nested creation", {"train.schedule.kind=constant"},
        R"({"name": "t", "train": {"schedule": {"kind": "constant"}}})");
    row("top level", {"name=other"}, R"({"name": "other"})");
    row("spaces", {" optimizer.lr = 0.5 "}, R"({"name": "t", "optimizer": {"lr": 0.5}})");
    row("equals in value", {"name=a=b"}, R"({"name": "a=b"})");
    row("empty value", {"name="}, R"({"name": ""})");
    row("later wins", {"train.steps=1", "train.steps=2"},
        R"({"name": "t", "train": {"steps": 2}})");
    row("siblings kept", {"optimizer.lr=0.1", "optimizer.name=sgd"},
        R"({"name": "t", "optimizer": {"lr": 0.1, "name": "sgd"}})");
    row("unknown key kept for validation", {"optimizer.lrr=1"},
        R"({"name": "t", "optimizer": {"lrr": 1}})");
    row("parallel section created", {"parallel.strategy=zero2", "parallel.world_size=4"},
        R"({"name": "t", "parallel": {"strategy": "zero2", "world_size": 4}})");
    row("3D keys", {"parallel.tp=2", "parallel.pp=2", "parallel.dp=-1", "parallel.schedule=gpipe"},
        R"({"name": "t", "parallel": {"tp": 2, "pp": 2, "dp": -1, "schedule": "gpipe"}})");
  }

  void overrides() {
    QFETCH(QStringList, assignments);
    QFETCH(QString, expected);
    json doc = {{"name", "t"}};
    for (const QString& a : assignments) apply_override(doc, a.toStdString());
    QCOMPARE(QString::fromStdString(doc.dump()),
             QString::fromStdString(json::parse(expected.toStdString()).dump()));
  }

  void malformedOverrides_data() {
    QTest::addColumn<QString>("assignment");
    QTest::addColumn<QString>("fragment");
    QTest::newRow("no equals") << "optimizer.lr"
                               << "expected key=value";
    QTest::newRow("empty") << ""
                           << "expected key=value";
    QTest::newRow("empty key") << "=5"
                               << "key before '=' is empty";
    QTest::newRow("blank key") << "  =5"
                               << "key before '=' is empty";
    QTest::newRow("double dot") << "a..b=1"
                                << "empty segment";
    QTest::newRow("leading dot") << ".a=1"
                                 << "empty segment";
    QTest::newRow("trailing dot") << "a.=1"
                                  << "empty segment";
    QTest::newRow("through a value") << "name.x=1"
                                     << "name is not an object";
  }

  void malformedOverrides() {
    QFETCH(QString, assignment);
    QFETCH(QString, fragment);
    json doc = {{"name", "t"}};
    const json before = doc;
    try {
      apply_override(doc, assignment.toStdString());
      QFAIL("no exception");
    } catch (const InvalidArgument& e) {
      QVERIFY2(QString(e.what()).contains(fragment), e.what());
      QVERIFY2(QString(e.what()).startsWith("override \"" + assignment + "\""), e.what());
    }
    QVERIFY(doc == before);
  }

  // Overrides go through the same validation as the file.
  void loadWithOverrides_data() {
    QTest::addColumn<QString>("assignment");
    QTest::addColumn<QString>("field");
    QTest::newRow("unknown key") << "optimizer.lrr=1"
                                 << "optimizer.lrr";
    QTest::newRow("wrong type") << "train.steps=abc"
                                << "train.steps";
    QTest::newRow("bad name") << "optimizer.name=lion"
                              << "optimizer.name";
    QTest::newRow("range") << "train.batch_size=0"
                           << "train.batch_size";
    QTest::newRow("unused") << "optimizer.momentum=0.9"
                            << "optimizer.momentum";
    QTest::newRow("array element") << "model.mlp.hidden=[128,0]"
                                   << "model.mlp.hidden[1]";
    QTest::newRow("section replaced") << "train=3"
                                      << "train";
    QTest::newRow("parallel strategy") << "parallel.strategy=zero3"
                                       << "parallel.strategy";
    QTest::newRow("accumulation") << "train.accumulation_steps=0"
                                  << "train.accumulation_steps";
    QTest::newRow("indivisible") << "train.accumulation_steps=5"
                                 << "train.batch_size";
  }

  void loadWithOverrides() {
    QFETCH(QString, assignment);
    QFETCH(QString, field);
    rejects((kJobs + "fashion_mlp.json").toStdString(), {assignment.toStdString()}, field + ": ");
  }

  void loadAppliesOverridesInOrder() {
    const JobSpec job =
        load_job((kJobs + "fashion_mlp.json").toStdString(),
                 {"optimizer.name=sgd", "optimizer.lr=0.1", "optimizer.momentum=0.9",
                  "model.mlp.hidden=[128,64]", "train.steps=10", "train.schedule.warmup_steps=0"});
    QCOMPARE(job.optimizer.name, std::string("sgd"));
    QCOMPARE(job.optimizer.lr, 0.1);
    QCOMPARE(job.optimizer.momentum, 0.9);
    QCOMPARE(job.model.mlp.hidden, (std::vector<int64_t>{128, 64}));
    QCOMPARE(job.train.steps, int64_t(10));
  }

  // --set reaches the parallel section and the new train fields like any other.
  void loadWithParallelOverrides() {
    // A file without a "parallel" section (the example jobs may carry their own).
    QTemporaryDir dir;
    const std::string path = dir.filePath("single.json").toStdString();
    write_file(QString::fromStdString(path), kBase);
    const JobSpec base = load_job(path);
    QCOMPARE(base.parallel.strategy, std::string("none"));
    const JobSpec job = load_job(
        path, {"parallel.strategy=zero2", "parallel.world_size=4", "parallel.bucket_mb=0.5",
               "parallel.overlap=false", "parallel.timeout_s=120", "parallel.backend=threads",
               "train.accumulation_steps=2", "train.clip_grad_norm=1.5"});
    QCOMPARE(job.parallel.strategy, std::string("zero2"));
    QCOMPARE(job.parallel.world_size, int64_t(4));
    QCOMPARE(job.parallel.bucket_mb, 0.5);
    QCOMPARE(job.parallel.overlap, false);
    QCOMPARE(job.parallel.timeout_s, 120.0);
    QCOMPARE(job.parallel.backend, std::string("threads"));
    QCOMPARE(job.train.accumulation_steps, int64_t(2));
    QCOMPARE(job.train.clip_grad_norm, 1.5);
    // Everything else is the file's.
    JobSpec rest = job;
    rest.parallel = base.parallel;
    rest.train.accumulation_steps = base.train.accumulation_steps;
    rest.train.clip_grad_norm = base.train.clip_grad_norm;
    QVERIFY(rest == base);

    const JobSpec fsdp = load_job(path, {"parallel.strategy=fsdp", "parallel.world_size=8",
                                         "parallel.fsdp_keep_params=true"});
    QCOMPARE(fsdp.parallel.world_size, int64_t(8));
    QVERIFY(fsdp.parallel.fsdp_keep_params);

    // Overridden values go through the same rules as the file's.
    rejects(path, {"parallel.world_size=4"}, "parallel.world_size: 4 ranks need a strategy");
    rejects(path, {"parallel.strategy=ddp", "parallel.world_size=3"},
            "train.batch_size: must be divisible by parallel.world_size x "
            "train.accumulation_steps = 3, got 8");
    rejects(path, {"parallel.strategy=fsdp", "parallel.bucket_mb=2"},
            "parallel.bucket_mb: not used by strategy fsdp");
  }

  // --set reaches the 3D keys; the example GPT job runs tensor- and pipeline-parallel from the
  // command line.
  void loadWithModelParallelOverrides() {
    const std::string path = (kJobs + "chars_gpt.json").toStdString();
    const JobSpec base = load_job(path);
    const JobSpec tp =
        load_job(path, {"parallel.strategy=ddp", "parallel.world_size=2", "parallel.tp=2"});
    QCOMPARE(tp.parallel.tp, int64_t(2));
    QCOMPARE(tp.parallel.pp, int64_t(1));
    QVERIFY(uses_model_parallelism(tp.parallel));

    const JobSpec three_d =
        load_job(path, {"parallel.strategy=zero2", "parallel.world_size=8", "parallel.pp=2",
                        "parallel.tp=2", "parallel.dp=2", "parallel.micro_batches=4",
                        "parallel.schedule=gpipe", "parallel.pp_partition=balanced"});
    QCOMPARE(three_d.parallel.pp, int64_t(2));
    QCOMPARE(three_d.parallel.tp, int64_t(2));
    QCOMPARE(three_d.parallel.dp, int64_t(2));
    QCOMPARE(three_d.parallel.micro_batches, int64_t(4));
    QCOMPARE(three_d.parallel.schedule, std::string("gpipe"));
    QCOMPARE(three_d.parallel.pp_partition, std::string("balanced"));
    JobSpec rest = three_d;
    rest.parallel = base.parallel;
    QVERIFY(rest == base);

    rejects(path, {"parallel.strategy=ddp", "parallel.world_size=3", "parallel.tp=3"},
            "parallel.tp: 3 does not divide model.gpt.heads = 4");
    rejects(path, {"parallel.strategy=ddp", "parallel.world_size=2", "parallel.tp=two"},
            "parallel.tp: expected an integer");
    rejects(path, {"parallel.micro_batch=2"},
            "parallel.micro_batch: unknown field (did you mean \"micro_batches\"?)");
    rejects(path, {"parallel.schedule=gpipe"}, "parallel.schedule: not used without pipeline");
  }

  // ---- files ----

  void malformedJson_data() {
    QTest::addColumn<QString>("text");
    // ":LINE:COL:" of the last character read: the end of the offending token (where nlohmann
    // stops), so a missing comma is reported at the end of the next key.
    QTest::addColumn<QString>("position");
    QTest::newRow("trailing comma") << "{\n  \"name\": \"x\",\n  \"train\": {\"steps\": 10,}\n}\n"
                                    << ":3:25:";
    QTest::newRow("missing comma") << "{\n  \"name\": \"x\"\n  \"train\": {}\n}\n"
                                   << ":3:9:";
    QTest::newRow("bad literal") << "{\"name\": tru}"
                                 << ":1:13:";
    QTest::newRow("unclosed") << "{\n  \"name\": \"x\"\n"
                              << ":3:1:";
    QTest::newRow("empty file") << ""
                                << ":1:1:";
  }

  void malformedJson() {
    QFETCH(QString, text);
    QFETCH(QString, position);
    QTemporaryDir dir;
    const QString path = dir.filePath("bad.json");
    write_file(path, text.toStdString());
    try {
      load_job(path.toStdString());
      QFAIL("no exception");
    } catch (const FormatError& e) {
      const QString msg = e.what();
      QVERIFY2(msg.startsWith(path + position + " invalid JSON: "), e.what());
      QVERIFY2(!msg.contains("json.exception"), e.what());
    }
  }

  void repeatedKeyIsAnError() {
    QVERIFY_THROWS_EXCEPTION(FormatError, parse_job_json(R"({"a": 1, "a": 2})"));
    try {
      parse_job_json(R"({"optimizer": {"lr": 0.1, "name": "sgd", "lr": 0.2}, "x": [{}, {}]})",
                     "job.json");
      QFAIL("no exception");
    } catch (const FormatError& e) {
      QCOMPARE(QString(e.what()), QString("job.json: optimizer.lr: key appears more than once"));
    }
    // The same key in different objects is fine.
    QCOMPARE(parse_job_json(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 3}, {"k": 4}]})").size(),
             size_t(3));
  }

  // A number beyond double's range (1e400) is refused naming its field, in a file and in a --set
  // value, as a FormatError / InvalidArgument (not the JSON library's own exception).
  void numbersOutOfRangeNameTheirField_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("message");
    QTest::newRow("object")
        << R"({"optimizer": {"lr": 1e400}})"
        << "job.json: optimizer.lr: 1e400 is out of range (not a finite number)";
    QTest::newRow("negative") << R"({"name": "x", "optimizer": {"name": "adam", "lr": -1E+999}})"
                              << "job.json: optimizer.lr: -1E+999 is out of range (not a finite "
                                 "number)";
    QTest::newRow("array element")
        << R"({"model": {"mlp": {"hidden": [256, 1e400]}}})"
        << "job.json: model.mlp.hidden[1]: 1e400 is out of range (not a finite number)";
    QTest::newRow("inside arrays of objects")
        << "{\"x\": [{\"a\": [1, 2]}, {\"b\": \"[1e400, {\", \"c\": [[0], 3, 2.5e308]}]}"
        << "job.json: x[1].c[2]: 2.5e308 is out of range (not a finite number)";
    QTest::newRow("many digits") << "{\"train\": {\"steps\": 1" + QString(400, '0') + "}}"
                                 << "job.json: train.steps: 1000000000000000000000000000000000000"
                                    "... is out of range (not a finite number)";
    QTest::newRow("top level") << "1e400"
                               << "job.json: 1e400 is out of range (not a finite number)";
  }

  void numbersOutOfRangeNameTheirField() {
    QFETCH(QString, text);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QString path = dir.filePath("job.json");
    write_file(path, text.toStdString());
    const auto [type, what] = caught_error([&] { parse_job_json(text.toStdString(), "job.json"); });
    QCOMPARE(type, QString("FormatError"));
    QCOMPARE(what, message);
    const auto [load_type, load_what] = caught_error([&] { load_job(path.toStdString()); });
    QCOMPARE(load_type, QString("FormatError"));
    QCOMPARE(load_what, QString(message).replace("job.json", path));
  }

  void overrideNumbersOutOfRange() {
    json doc = json::parse(kBase);
    const auto [type, what] = caught_error([&] { apply_override(doc, "optimizer.lr=1e400"); });
    QCOMPARE(type, QString("InvalidArgument"));
    QCOMPARE(what, QString("optimizer.lr: 1e400 is out of range (not a finite number)"));
    const auto [list_type, list_what] =
        caught_error([&] { apply_override(doc, "model.mlp.hidden=[64, -1e999]"); });
    QCOMPARE(list_type, QString("InvalidArgument"));
    QCOMPARE(list_what,
             QString("model.mlp.hidden[1]: -1e999 is out of range (not a finite number)"));
    QCOMPARE(doc, json::parse(kBase));  // unchanged
    // Tiny numbers read as 0 (as JSON parsers do), huge finite ones go on to validation.
    apply_override(doc, "optimizer.weight_decay=1e-400");
    QCOMPARE(doc["optimizer"]["weight_decay"].get<double>(), 0.0);
    apply_override(doc, "train.steps=1e18");
    QCOMPARE(doc["train"]["steps"].get<double>(), 1e18);
    // A string that merely starts like a number stays a string.
    apply_override(doc, "name=1e400x");
    QCOMPARE(doc["name"], json("1e400x"));
  }

  // JSON nested deeper than 64 levels is refused before it is parsed (anything recursive over such
  // a document could exhaust the stack); brackets inside strings do not count.
  void deepNestingIsRefused() {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    auto [type, what] = caught_error([&] { parse_job_json("{\"name\": " + deep + "}", "d.json"); });
    QCOMPARE(type, QString("FormatError"));
    QCOMPARE(what, QString("d.json: nested deeper than 64 levels"));
    std::tie(type, what) =
        caught_error([&] { parse_job_json(std::string(100000, '{'), "d.json"); });
    QCOMPARE(what, QString("d.json: nested deeper than 64 levels"));

    const auto nested = [](int levels) {
      return std::string(size_t(levels), '[') + std::string(size_t(levels), ']');
    };
    QCOMPARE(parse_job_json(nested(64)).size(), size_t(1));
    std::tie(type, what) = caught_error([&] { parse_job_json(nested(65), "j"); });
    QCOMPARE(what, QString("j: nested deeper than 64 levels"));
    const std::string in_string = "{\"name\": \"" + std::string(1000, '[') + "\\\"{{{\"}";
    QCOMPARE(parse_job_json(in_string)["name"].get<std::string>().size(), size_t(1000 + 4));

    // --set values: the key's segments count as levels too.
    json doc = json::parse(kBase);
    std::tie(type, what) = caught_error([&] { apply_override(doc, "model.mlp.hidden=" + deep); });
    QCOMPARE(type, QString("InvalidArgument"));
    QCOMPARE(what, QString("model.mlp.hidden: nested deeper than 64 levels"));
    std::string long_key = "a";
    for (int i = 0; i < 70; ++i) long_key += ".a";
    std::tie(type, what) = caught_error([&] { apply_override(doc, long_key + "=1"); });
    QCOMPARE(type, QString("InvalidArgument"));
    QVERIFY2(what.endsWith(": nested deeper than 64 levels"), qPrintable(what));
    QCOMPARE(doc, json::parse(kBase));
    apply_override(doc, "model.mlp.hidden=" + nested(61));  // 3 + 61 levels
    std::tie(type, what) =
        caught_error([&] { apply_override(doc, "model.mlp.hidden=" + nested(62)); });
    QCOMPARE(type, QString("InvalidArgument"));
  }

  // ---- text from the file in messages (found by fuzzing: tests/fuzz/crashes/fuzz_job-*) ----

  // A key the schema does not know is named with its control characters (and DEL) shown as \xNN:
  // one line, not cut short by a NUL, no ESC reaching the terminal (fuzz_job-escape-in-key,
  // fuzz_job-nul-in-key). The app's list (check_job_json) gets the same field.
  void unknownKeyWithControlCharacters_data() {
    QTest::addColumn<QByteArray>("key");
    QTest::addColumn<QString>("section");
    QTest::addColumn<QString>("field");
    QTest::newRow("escape") << QByteArray("a\x1b[31mb") << ""
                            << "a\\x1b[31mb";
    QTest::newRow("nul") << QByteArray("\0x", 2) << ""
                         << "\\x00x";
    QTest::newRow("newline") << QByteArray("a\nb") << ""
                             << "a\\x0ab";
    QTest::newRow("in a section") << QByteArray("l\x7fr") << "optimizer"
                                  << "optimizer.l\\x7fr";
  }

  void unknownKeyWithControlCharacters() {
    QFETCH(QByteArray, key);
    QFETCH(QString, section);
    QFETCH(QString, field);
    json doc = json::parse(kBase);
    json& where = section.isEmpty() ? doc : doc[section.toStdString()];
    where[key.toStdString()] = 2;
    const QString msg = rejection(doc);
    QVERIFY2(one_printable_line(msg), qPrintable(msg.toUtf8().toPercentEncoding()));
    QVERIFY2(msg.startsWith(field + ": unknown field"), qPrintable(msg));
    const auto errors = check_job_json(doc);
    QCOMPARE(errors.size(), size_t(1));
    QCOMPARE(QString::fromStdString(errors[0].field), field);

    // The crash inputs themselves, as files.
    const std::string text = key.startsWith('\0') ? "{\"\\u0000x\": 1}" : "{\"a\\u001b[31mb\": 2}";
    const QString first = rejection(parse_job_json(text, "job.json"));
    QVERIFY2(one_printable_line(first), qPrintable(first.toUtf8().toPercentEncoding()));
    QVERIFY2(first.contains(": unknown field"), qPrintable(first));
  }

  // The helper itself (engine/core/display_text.h): controls and DEL as \\xNN, UTF-8 kept, the cap
  // counted on what is shown, "..." included, never splitting a character.
  void displayText() {
    QCOMPARE(display_text(std::string("a\0\x1b[2J\n\x7f\t", 9)),
             std::string("a\\x00\\x1b[2J\\x0a\\x7f\\x09"));
    QCOMPARE(display_text("gr\u00fc\u00dfe \u2713"), std::string("gr\u00fc\u00dfe \u2713"));
    QCOMPARE(display_text(std::string(64, 'k')), std::string(64, 'k'));
    QCOMPARE(display_text(std::string(65, 'k')), std::string(61, 'k') + "...");
    QCOMPARE(display_text("abcdefgh", 6), std::string("abc..."));
    QCOMPARE(display_text("ab\ncdef", 6), std::string("ab..."));     // not half of "\\x0a"
    QCOMPARE(display_text("ab\u00fcdef", 6), std::string("ab..."));  // not half of the "\u00fc"
    QCOMPARE(display_text(std::string(600, 'p'), std::string_view::npos), std::string(600, 'p'));
  }

  // A repeated key is named the same way.
  void repeatedKeyWithControlCharacters() {
    auto [type, what] = caught_error(
        [] { parse_job_json("{\"a\\u001b[2J\": 1, \"a\\u001b[2J\": 2}", "job.json"); });
    QCOMPARE(type, QString("FormatError"));
    QCOMPARE(what, QString("job.json: a\\x1b[2J: key appears more than once"));
    std::tie(type, what) = caught_error(
        [] { parse_job_json("{\"optimizer\": {\"\\u0000\": 1, \"\\u0000\": 2}}", "job.json"); });
    QCOMPARE(what, QString("job.json: optimizer.\\x00: key appears more than once"));
  }

  // A number out of range is named by its field's path, control characters of its keys shown
  // (fuzz_job-newline-in-path: a raw newline inside a key, found on the text before parsing).
  void outOfRangeNumberUnderAKeyWithControlCharacters() {
    auto [type, what] = caught_error([] { parse_job_json("{\"a\nb\": 1e400}\n", "job.json"); });
    QCOMPARE(type, QString("FormatError"));
    QCOMPARE(what, QString("job.json: a\\x0ab: 1e400 is out of range (not a finite number)"));
    std::tie(type, what) =
        caught_error([] { parse_job_json("{\"x\": {\"\x1b[2J\": [0, 1e999]}}", "job.json"); });
    QCOMPARE(what, QString("job.json: x.\\x1b[2J[1]: 1e999 is out of range (not a finite number)"));
    // A long key is still cut to 64 bytes, "..." included.
    std::tie(type, what) = caught_error(
        [] { parse_job_json("{\"" + std::string(100, 'k') + "\": 1e400}", "job.json"); });
    QCOMPARE(what, QString("job.json: " + QString(61, 'k') +
                           "...: 1e400 is out of range (not a finite number)"));
  }

  // String values shown in messages (a type error, a choice, the telemetry address, an unknown
  // optimizer) keep their control characters out of the message too.
  void valuesWithControlCharacters() {
    const auto expect = [](const char* patch, const QString& start) {
      const QString msg = rejection(patched(patch));
      QVERIFY2(one_printable_line(msg), qPrintable(msg.toUtf8().toPercentEncoding()));
      QVERIFY2(msg.startsWith(start), qPrintable(msg));
    };
    expect("{\"device\": \"cpu\\u001b[2J\"}",
           "device: must be one of \"cpu\", \"cuda\", \"test\", got \"cpu\\x1b[2J\"");
    expect("{\"train\": {\"steps\": \"1\\u00000\"}}",
           "train.steps: expected an integer, got string \"1\\x000\"");
    expect("{\"telemetry\": {\"address\": \"h\\n:0\"}}",
           "telemetry.address: expected HOST:PORT with a port in [1, 65535], got 'h\\x0a:0'");
    expect("{\"optimizer\": {\"name\": \"ad\\u001bam\"}}",
           "optimizer.name: unknown optimizer 'ad\\x1bam'");
    expect("{\"model\": {\"kind\": \"g\\u0007pt\"}}",
           "model.kind: must be one of \"mlp\", \"gpt\", got \"g\\x07pt\"");
    expect("{\"data\": {\"dataset\": \"chars\\u001b\"}}",
           "data.dataset: must be one of \"fashion-mnist\", \"chars\", got \"chars\\x1b\"");
  }

  // The file's own path, when it holds a newline (a name a script made up), stays on the line.
  void pathWithNewline() {
    QTemporaryDir dir;
    const QString missing = dir.filePath("no\nsuch.json");
    const auto [type, what] = caught_error([&] { load_job(missing.toStdString()); });
    QVERIFY2(one_printable_line(what), qPrintable(what.toUtf8().toPercentEncoding()));
    QVERIFY2(what.startsWith("cannot open job file " + dir.filePath("no\\x0asuch.json") + ": "),
             qPrintable(what));
  }

  void malformedFileWithNewlineInPath() {
    QTemporaryDir dir;
    const QString bad = dir.filePath("bad\n.json");
    write_file(bad, "{\"name\": tru}");
    const auto [type, what] = caught_error([&] { load_job(bad.toStdString()); });
    QCOMPARE(type, QString("FormatError"));
    QVERIFY2(what.startsWith(dir.filePath("bad\\x0a.json") + ":1:13: invalid JSON: "),
             qPrintable(what));
  }

  void missingFile() {
    QTemporaryDir dir;
    const QString path = dir.filePath("nope.json");
    try {
      load_job(path.toStdString());
      QFAIL("no exception");
    } catch (const IoError& e) {
      QVERIFY2(QString(e.what()).contains(path), e.what());
    }
    QVERIFY_THROWS_EXCEPTION(IoError, load_job(dir.path().toStdString()));  // a directory
  }

  // A file that never ends (or is far larger than any job) is refused once 16 MiB are read.
  void endlessFileIsRefused() {
    const auto [type, what] = caught_error([] { load_job("/dev/zero"); });
    QCOMPARE(type, QString("FormatError"));
    QCOMPARE(what, QString("/dev/zero: larger than 16 MiB, not a job file"));
  }

  // ---- the example jobs ----

  void exampleJobsLoad_data() {
    QTest::addColumn<QString>("file");
    const QStringList files = QDir(kJobs).entryList({"*.json"}, QDir::Files, QDir::Name);
    for (const char* required : {"fashion_mlp.json", "chars_gpt.json", "fashion_mlp_sgd.json"})
      QVERIFY2(files.contains(required), required);
    for (const QString& f : files) QTest::newRow(qPrintable(f)) << f;
  }

  void exampleJobsLoad() {
    QFETCH(QString, file);
    const std::string path = (kJobs + file).toStdString();
#ifndef SHARDLAB_HAVE_MPI
    // A job made for mpirun is refused by a build without MPI, and says why.
    const json doc = read_job_json(path);
    if (doc.contains("parallel") && doc["parallel"].value("backend", "") == "mpi") {
      const QString msg = rejection(doc);
      QVERIFY2(msg.startsWith("parallel.backend: mpi is not available"), qPrintable(msg));
      QVERIFY(rejection(with_override(doc, "parallel.backend=threads")).isEmpty());
      return;
    }
#endif
    JobSpec job;
    try {
      job = load_job(path);
    } catch (const Error& e) {
      QFAIL(e.what());
    }
    QVERIFY(job_from_json(job_to_json(job)) == job);
  }

  // A document built in C++ holds 1 as a signed integer where a parser holds it as unsigned:
  // both are accepted for a non-negative field, and -1 is refused either way.
  void nonNegativeFieldsFromCode() {
    json doc = {{"model", {{"kind", "mlp"}, {"seed", 1}}}, {"train", {{"steps", 5}}}};
    QVERIFY(doc["model"]["seed"].is_number_integer() && !doc["model"]["seed"].is_number_unsigned());
    QCOMPARE(rejection(doc), QString());
    QCOMPARE(job_from_json(doc).model.seed, uint64_t{1});
    doc["model"]["seed"] = -1;
    QVERIFY2(rejection(doc).contains("model.seed: must be >= 0, got -1"),
             qPrintable(rejection(doc)));
  }

  void demoJobIsTheDocumentedOne() {
    const JobSpec job = load_job((kJobs + "fashion_mlp.json").toStdString());
    QCOMPARE(job.model.kind, std::string("mlp"));
    QCOMPARE(job.model.mlp.hidden, (std::vector<int64_t>{256, 128}));
    QCOMPARE(job.data.dataset, std::string("fashion-mnist"));
    QCOMPARE(job.optimizer.name, std::string("adam"));
    QCOMPARE(job.optimizer.lr, 1e-3);
    QCOMPARE(job.train.batch_size, int64_t(64));
    QCOMPARE(job.train.schedule.kind, std::string("warmup_cosine"));
    QVERIFY(job.train.steps >= 3000 && job.train.steps <= 4000);
    QVERIFY(job.train.eval_every > 0 && job.train.eval_every < job.train.steps);

    const JobSpec gpt = load_job((kJobs + "chars_gpt.json").toStdString());
    QCOMPARE(gpt.model.kind, std::string("gpt"));
    QCOMPARE(gpt.optimizer.name, std::string("adamw"));
    QCOMPARE(gpt.model.gpt.context, int64_t(64));
    QCOMPARE(gpt.model.gpt.width, int64_t(64));
    QCOMPARE(gpt.model.gpt.layers, int64_t(2));
    QCOMPARE(gpt.model.gpt.heads, int64_t(4));

    const JobSpec sgd = load_job((kJobs + "fashion_mlp_sgd.json").toStdString());
    QCOMPARE(sgd.optimizer.name, std::string("sgd"));
    QVERIFY(sgd.optimizer.momentum > 0);
  }
};

QTEST_APPLESS_MAIN(TestJob)
#include "tst_job.moc"
