# Included from engine/CMakeLists.txt (paths relative to engine/), after the modules it uses: the
# entry `shardlab run`, `shardlab doctor` and `shardlab bench model` use to train a job on its
# GPU(s) (device_training.h). Always built; without the CUDA kernels it says so instead of
# training. With NCCL, ddp on one GPU per rank all-reduces device memory over it.
add_library(shardlab_device_train STATIC device/device_training.cpp)
target_link_libraries(shardlab_device_train
  PUBLIC shardlab_train shardlab_job
  PRIVATE shardlab_run shardlab_comm_threads shardlab_warnings)
if(SHARDLAB_HAVE_CUDA_KERNELS)
  target_compile_definitions(shardlab_device_train PRIVATE SHARDLAB_HAVE_DEVICE_TRAINING=1)
  if(TARGET shardlab_comm_nccl)
    target_link_libraries(shardlab_device_train PRIVATE shardlab_comm_nccl)
    target_compile_definitions(shardlab_device_train PRIVATE SHARDLAB_HAVE_NCCL=1)
  else()
    target_compile_definitions(shardlab_device_train PRIVATE SHARDLAB_HAVE_NCCL=0)
  endif()
else()
  target_compile_definitions(shardlab_device_train PRIVATE SHARDLAB_HAVE_DEVICE_TRAINING=0)
endif()
