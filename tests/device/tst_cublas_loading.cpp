// cuBLAS is opened on first use, not at program start (kernels/cuda/cublas_api.h): a process that
// links the CUDA device but never multiplies on a GPU does not map libcublas, and the first call
// of cublas_api() maps it and resolves every function. Needs no GPU: loading the library and
// asking it for a status name touch no device.
#include <QtTest/QtTest>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/device/device.h"
#include "kernels/cuda/cublas_api.h"

namespace {

std::string own_maps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

class TestCublasLoading : public QObject {
  Q_OBJECT

 private slots:
  void notMappedAtStart() {
    // make_device, and with it the CUDA device and its kernels, is linked in and has run (for the
    // cpu kind: a cuda device would need a GPU).
    QCOMPARE(shardlab::make_device(shardlab::DeviceKind::cpu)->kind(), shardlab::DeviceKind::cpu);
    const std::string maps = own_maps();
    QVERIFY2(maps.find("libcublas") == std::string::npos, maps.c_str());
  }

  void loadedOnFirstUse() {
    const shardlab::kernels::CublasApi& api = shardlab::kernels::cublas_api();
    QVERIFY(api.create != nullptr && api.sgemm != nullptr && api.destroy != nullptr);
    QCOMPARE(QString(api.status_name(CUBLAS_STATUS_NOT_INITIALIZED)),
             QString("CUBLAS_STATUS_NOT_INITIALIZED"));
    QCOMPARE(QString(shardlab::kernels::cublas_status_name(CUBLAS_STATUS_INVALID_VALUE)),
             QString("CUBLAS_STATUS_INVALID_VALUE"));
    QVERIFY(own_maps().find("libcublas.so") != std::string::npos);
    shardlab::kernels::destroy_cublas_handle(nullptr);  // ignored, as documented
  }
};

QTEST_GUILESS_MAIN(TestCublasLoading)
#include "tst_cublas_loading.moc"
