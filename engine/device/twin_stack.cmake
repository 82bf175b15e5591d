# Included from engine/CMakeLists.txt (paths relative to engine/).
# The GPU training path of old (a second stack beside engine/model and engine/train, going away as
# they move onto shardlab_device): it uses the trainer, never the reverse.
#
# The context, device buffers, the model's layers on kernels/cuda + cuBLAS, the fused optimizers,
# the trainer: host code only (.cpp through the C++ compiler; the device code is in kernels/cuda),
# built with the CUDA kernels.
if(SHARDLAB_HAVE_CUDA_KERNELS)
  add_library(shardlab_device_gpu STATIC
    device/gpu_layers.cpp
    device/gpu_model.cpp
    device/gpu_optimizer.cpp
    device/gpu_trainer.cpp
  )
  target_link_libraries(shardlab_device_gpu
    PUBLIC shardlab_device shardlab_kernels_cuda shardlab_model shardlab_data shardlab_optim shardlab_train
           shardlab_comm CUDA::cudart
    PRIVATE shardlab_warnings)
  if(TARGET shardlab_comm_nccl)
    target_link_libraries(shardlab_device_gpu PUBLIC shardlab_comm_nccl)
    target_compile_definitions(shardlab_device_gpu PUBLIC SHARDLAB_HAVE_NCCL=1)
  else()
    target_compile_definitions(shardlab_device_gpu PUBLIC SHARDLAB_HAVE_NCCL=0)
  endif()
endif()

# Always built: the entry `shardlab run` and `shardlab bench model` use for a job's device; without
# the GPU path it says so.
add_library(shardlab_device_train STATIC device/device_training.cpp)
target_link_libraries(shardlab_device_train
  PUBLIC shardlab_train shardlab_job
  PRIVATE shardlab_comm_threads shardlab_warnings)
if(SHARDLAB_HAVE_CUDA_KERNELS)
  target_link_libraries(shardlab_device_train PRIVATE shardlab_device_gpu)
  target_compile_definitions(shardlab_device_train PRIVATE SHARDLAB_HAVE_DEVICE_TRAINING=1)
else()
  target_compile_definitions(shardlab_device_train PRIVATE SHARDLAB_HAVE_DEVICE_TRAINING=0)
endif()
