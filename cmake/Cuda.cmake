# TTR_CUDA: ON builds the kernels of gpu/ for running (requires nvcc); CHECK compiles
# every CUDA source with the device code unoptimised (nvcc -G), which catches what
# the compiler and ptxas reject in a fraction of the time (gka/chunk_backward.cu
# 6 s instead of 51 s; CI's CUDA job time 360 s -> 120 s), and links
# kernels that are correct but slow; OFF leaves them out. AUTO: ON where nvcc is
# found and `nvidia-smi -L` lists a GPU, CHECK where nvcc is found without a GPU
# (CI, build machines: the kernels could not run there anyway), OFF without nvcc.
# Building for another machine's GPU: -DTTR_CUDA=ON (the `cuda` preset).
# A CHECK build says so wherever its kernels run (device::status(), the GPU
# benchmarks refuse to time them).
# Sets TTR_HAVE_CUDA (the kernels are compiled and linked) and TTR_CUDA_CHECK.
set(TTR_HAVE_CUDA OFF)
set(TTR_CUDA_CHECK OFF)
if(NOT TTR_CUDA MATCHES "^(AUTO|ON|CHECK|OFF)$")
  message(FATAL_ERROR "TTR_CUDA='${TTR_CUDA}': AUTO, ON, CHECK or OFF")
endif()
if(NOT TTR_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    set(CMAKE_CUDA_STANDARD 17)  # the CMake here knows no CUDA20 dialect flags for nvcc 13
    set(TTR_HAVE_CUDA ON)
    if(TTR_CUDA STREQUAL "CHECK")
      set(TTR_CUDA_CHECK ON)
    elseif(TTR_CUDA STREQUAL "AUTO")
      execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _smi_rc OUTPUT_VARIABLE _smi_out ERROR_QUIET)
      if(NOT _smi_rc EQUAL 0 OR NOT _smi_out MATCHES "GPU [0-9]")
        set(TTR_CUDA_CHECK ON)
      endif()
    endif()
  elseif(TTR_CUDA MATCHES "^(ON|CHECK)$")
    message(FATAL_ERROR "TTR_CUDA=${TTR_CUDA} but no CUDA compiler was found")
  endif()
endif()
if(TTR_CUDA_CHECK)
  message(STATUS "ttrcheck: CUDA kernels compiled as a check (TTR_CUDA=${TTR_CUDA}, no GPU here: device code "
                 "unoptimised, -G; -DTTR_CUDA=ON builds them for running)")
else()
  message(STATUS "ttrcheck: CUDA kernels ${TTR_HAVE_CUDA}")
endif()
