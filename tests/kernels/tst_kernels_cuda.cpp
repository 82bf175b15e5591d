// Every CUDA kernel against its CPU reference, through the checks `shardlab doctor` runs
// (engine/doctor/kernel_checks.h): one data row per check, each printed with qInfo; the cases,
// data and tolerances (and where the tolerances come from) are in engine/doctor/kernel_checks.cpp.
// The suite also requires every op to appear among the checks, so a case dropped from the doctor
// fails here. Without a usable GPU the whole suite is skipped with the reason (ctest reports it as
// skipped). bad_arguments_name_the_kernel checks the launchers' own error messages.
#include <QtTest>

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "engine/doctor/check.h"
#include "engine/doctor/kernel_checks.h"
#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/sgd_update.h"
#include "kernels/cuda/sq_norm.h"
#include "tests/common/doctor_rows.h"

using namespace shardlab::kernels;
namespace doctor = shardlab::doctor;

namespace {

#define CUDA_OK(expr)                                                                 \
  do {                                                                                \
    const cudaError_t e_ = (expr);                                                    \
    if (e_ != cudaSuccess)                                                            \
      QFAIL(qPrintable(QStringLiteral("%1: %2").arg(#expr, cudaGetErrorString(e_)))); \
  } while (0)

// The start of at least one check's name per op and output (names are "<op> [output] <case>",
// engine/doctor/kernel_checks.h): a check the doctor silently stops making fails the suite.
const std::vector<std::string> kExpected{
    // the optimizer updates, fp32 and with the bf16 copy
    "sgd_update fp32 ", "sgd_update bf16 ", "sgd_update bf16-copy ", "sgd_momentum_update fp32 ",
    "sgd_momentum_update bf16 ", "sgd_momentum_update bf16-copy ", "sgd_nesterov_update fp32 ",
    "sgd_nesterov_update bf16 ", "sgd_nesterov_update bf16-copy ", "adam_update fp32 ",
    "adam_update bf16 ", "adam_update bf16-copy ", "adamw_update fp32 ", "adamw_update bf16 ",
    "adamw_update bf16-copy ", "rmsprop_update fp32 ", "rmsprop_update bf16 ",
    "rmsprop_update bf16-copy ", "rmsprop_momentum_update fp32 ", "rmsprop_momentum_update bf16 ",
    "rmsprop_momentum_update bf16-copy ", "adagrad_update fp32 ", "adagrad_update bf16 ",
    "adagrad_update bf16-copy ",
    // bf16 casts and the squared norm
    "scale_cast ", "sq_norm n=", "sq_norm rerun ",
    // element-wise and activations
    "add ", "scale ", "bias_add ", "bias_grad ", "relu_forward ", "relu_backward ",
    "gelu_forward tanh ", "gelu_forward n=", "gelu_backward (t given) ",
    "gelu_backward (t recomputed) ",
    // layer norm, softmax cross-entropy, embedding
    "layer_norm_forward y ", "layer_norm_forward xhat ", "layer_norm_forward rstd ",
    "layer_norm_backward dx ", "layer_norm_backward dweight ", "layer_norm_backward dbias ",
    "softmax_xent_forward probs ", "softmax_xent_forward row_loss ",
    "softmax_xent_forward row_correct ", "softmax_xent_backward ", "embedding_forward ",
    "embedding_backward dtable ", "embedding_backward dpos ",
    // tensor parallelism: vocab-parallel cross-entropy, range-masked embedding
    "vocab_xent_row_max ", "vocab_xent_partials sum_exp ", "vocab_xent_partials target_logit ",
    "vocab_xent_probs probs ", "vocab_xent_probs row_loss ", "vocab_xent_backward ",
    "vocab_xent_argmax_neg_id ", "range_embedding_forward ", "range_embedding_backward dtable ",
    "range_embedding_backward dpos ",
    // GEMM and attention
    "gemm NN ", "gemm NT ", "gemm TN ", "gemm TT ", "gemm padding ", "gemm_strided_batched NN ",
    "gemm_strided_batched TT ", "gemm_strided_batched padding ", "attention_forward causal_zeros ",
    "attention_forward probs ", "attention_forward att ", "attention_backward dqkv "};

}  // namespace

class tst_KernelsCuda : public QObject {
  Q_OBJECT

  doctor::CheckList checks_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;

 private slots:
  void initTestCase() {
    checks_ = doctor::kernel_checks(0);
    QVERIFY(!checks_.empty());
    const QString skip = shardlab::test::whole_group_skipped(checks_);
    if (skip.startsWith("no usable GPU")) QSKIP(qPrintable(skip));
    qInfo("device 0: %s", shardlab::describe_gpu(0).c_str());
    for (const doctor::CheckResult& c : checks_)
      qInfo("%s", qPrintable(shardlab::test::describe_check(c)));
    qInfo("%d checks: %d passed, %d failed, %d skipped", static_cast<int>(checks_.size()),
          doctor::count(checks_, doctor::CheckStatus::kPass),
          doctor::count(checks_, doctor::CheckStatus::kFail),
          doctor::count(checks_, doctor::CheckStatus::kSkip));
    // For bad_arguments_name_the_kernel (kernel_checks made device 0 current).
    CUDA_OK(cudaStreamCreate(&stream_));
    cublas_ = make_cublas_handle(stream_);
  }

  void cleanupTestCase() {
    destroy_cublas_handle(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  void kernel_matches_cpu_data() { shardlab::test::add_check_rows(checks_); }

  void kernel_matches_cpu() {
    QFETCH(int, index);
    const doctor::CheckResult& c = checks_.at(static_cast<std::size_t>(index));
    QCOMPARE(QString::fromStdString(c.group), QStringLiteral("kernels"));
    QVERIFY2(c.status == doctor::CheckStatus::kPass, qPrintable(shardlab::test::describe_check(c)));
  }

  void every_op_is_checked() {
    for (const std::string& prefix : kExpected) {
      bool found = false;
      for (const doctor::CheckResult& c : checks_) found = found || c.name.rfind(prefix, 0) == 0;
      QVERIFY2(found, qPrintable(QStringLiteral("no check named \"%1...\" among the %2 checks")
                                     .arg(QString::fromStdString(prefix))
                                     .arg(checks_.size())));
    }
    // Names are unique (one row per check).
    for (std::size_t i = 0; i < checks_.size(); ++i)
      for (std::size_t j = i + 1; j < checks_.size(); ++j)
        QVERIFY2(checks_[i].name != checks_[j].name, checks_[i].name.c_str());
  }

  void bad_arguments_name_the_kernel() {
    SgdArgs a;
    a.n = -1;
    try {
      sgd_update_cuda(a, stream_);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("sgd_update_cuda") != std::string::npos, e.what());
    }
    try {
      sq_norm_cuda(nullptr, -5, nullptr, stream_);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("sq_norm_cuda") != std::string::npos, e.what());
    }
    try {
      layer_norm_forward_cuda(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, -1, 8, 1e-5f,
                              stream_);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("layer_norm_forward_cuda") != std::string::npos,
               e.what());
    }
    try {
      // lda smaller than the row length: cuBLAS answers CUBLAS_STATUS_INVALID_VALUE.
      gemm_cuda(cublas_, Trans::No, Trans::No, 4, 4, 4, 1.0f, nullptr, 1, nullptr, 4, 0.0f, nullptr,
                4);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("cublasSgemm") != std::string::npos &&
                   std::string(e.what()).find("CUBLAS_STATUS_INVALID_VALUE") != std::string::npos,
               e.what());
    }
    try {
      gemm_cuda(cublas_, Trans::No, Trans::No, int64_t{1} << 32, 4, 4, 1.0f, nullptr, 4, nullptr, 4,
                0.0f, nullptr, 4);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("gemm_cuda") != std::string::npos, e.what());
    }
  }
};

QTEST_APPLESS_MAIN(tst_KernelsCuda)
#include "tst_kernels_cuda.moc"
