# Every dependency is a Debian package (scripts/install-deps installs them).
find_package(Boost 1.74 REQUIRED)                       # headers: Multiprecision
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
# The slicer's parallel runs over (sequence, head) (oracles/slices.cpp): GCC's
# libgomp (Debian: part of gcc; libomp-dev for clang).
find_package(OpenMP REQUIRED COMPONENTS CXX)
# TTR_PORTABLE: executables that need nothing but the C library (and the CUDA
# driver): MPFI/MPFR/GMP from their static archives, fmt header-only, libstdc++
# and libgcc static. For machines without our packages (the lent GPU machine,
# docs/gpu.md; compute campaigns sharded elsewhere).
if(TTR_PORTABLE)
  set(CMAKE_FIND_LIBRARY_SUFFIXES .a)
  add_link_options(-static-libstdc++ -static-libgcc)
  set(TTR_FMT fmt::fmt-header-only)
else()
  set(TTR_FMT fmt::fmt)
endif()
pkg_check_modules(MPFR REQUIRED IMPORTED_TARGET mpfr)
pkg_check_modules(GMP REQUIRED IMPORTED_TARGET gmp)
# MPFI ships no pkg-config file on Debian.
find_path(MPFI_INCLUDE_DIR mpfi.h REQUIRED)
find_library(MPFI_LIBRARY mpfi REQUIRED)
find_library(TTR_MPFR_LIBRARY mpfr REQUIRED)
find_library(TTR_GMP_LIBRARY gmp REQUIRED)
add_library(ttr_mpfi INTERFACE)
target_include_directories(ttr_mpfi INTERFACE ${MPFI_INCLUDE_DIR} ${MPFR_INCLUDE_DIRS} ${GMP_INCLUDE_DIRS})
# Link order matters for static archives: MPFI needs MPFR needs GMP.
target_link_libraries(ttr_mpfi INTERFACE ${MPFI_LIBRARY} ${TTR_MPFR_LIBRARY} ${TTR_GMP_LIBRARY})
# QD (libqd-dev): double-double arithmetic, the `dd` oracle tier
# (reference/core/double_double.hpp). Found like MPFI, so that TTR_PORTABLE picks
# its static archive.
find_path(QD_INCLUDE_DIR qd/dd_real.h REQUIRED)
find_library(QD_LIBRARY qd REQUIRED)
add_library(ttr_qd INTERFACE)
target_include_directories(ttr_qd INTERFACE ${QD_INCLUDE_DIR})
target_link_libraries(ttr_qd INTERFACE ${QD_LIBRARY})
if(TTR_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_package(rapidcheck REQUIRED)
endif()
if(TTR_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
