// engine/core/cuda_check.h, the engine's one check of CUDA runtime return codes. This suite
// includes no CUDA header: the check must compile without one. Codes are the CUDA runtime's
// (0 cudaSuccess, 2 cudaErrorMemoryAllocation); no GPU is needed to turn a code into a message.
#include <QtTest>

#include <string>

#include "engine/core/cuda_check.h"
#include "engine/core/error.h"

using namespace shardlab;

namespace {
constexpr int kSuccess = 0;
constexpr int kOutOfMemory = 2;  // cudaErrorMemoryAllocation
}  // namespace

class TestCudaCheck : public QObject {
  Q_OBJECT
 private slots:
  void successPassesAndTheCallRunsOnce() {
    int calls = 0;
    SL_CUDA_CHECK((++calls, kSuccess), "nothing");
    QCOMPARE(calls, 1);
  }

  void failureIsADeviceErrorNamingTheCall() {
    int calls = 0;
    try {
      SL_CUDA_CHECK((++calls, kOutOfMemory), "cudaMalloc (params)");
      QFAIL("no exception");
    } catch (const DeviceError& e) {
      const std::string what = e.what();
      QVERIFY2(what.rfind("cudaMalloc (params): ", 0) == 0, e.what());
      // The runtime's name for the code where the build has CUDA, the number where it has not.
      QVERIFY2(what.find("cudaErrorMemoryAllocation") != std::string::npos ||
                   what.find("CUDA error 2") != std::string::npos,
               e.what());
      QVERIFY2(e.where().find("tst_cuda_check.cpp") != std::string::npos, e.where().c_str());
    }
    QCOMPARE(calls, 1);
  }

  void theErrorTypeCanBeChosen() {
    QVERIFY_THROWS_EXCEPTION(InternalError,
                             SL_CUDA_CHECK_T(InternalError, kOutOfMemory, "cudaMemcpy"));
    try {
      SL_CUDA_CHECK_T(InternalError, kOutOfMemory, "cudaMemcpy");
    } catch (const DeviceError&) {
      QFAIL("SL_CUDA_CHECK_T threw DeviceError instead of the type it was given");
    } catch (const InternalError&) {
    }
  }

  void errorTextForMessagesThatExplain() {
    const std::string text = cuda_error_text(kOutOfMemory);
    QVERIFY2(
        text == "CUDA error 2" || text.find("(cudaErrorMemoryAllocation)") != std::string::npos,
        text.c_str());
  }
};

QTEST_GUILESS_MAIN(TestCudaCheck)
#include "tst_cuda_check.moc"
