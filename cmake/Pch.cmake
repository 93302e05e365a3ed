# Precompiled headers (TTR_PCH). Parsing Boost.Multiprecision's MPFR/MPFI headers
# (reference/core/multiprecision.hpp, ~1300 headers) takes 2.2 s of the 4.5 s a
# runner TU of the mpfr tier takes to compile, and ~190 TUs include it; a runner of
# a hardware tier parses the same STL and scalar headers. ttr_precompile(target)
# precompiles that header once per target and force-includes it in the target's
# C++ TUs, but for the sources listed after the target (compiled with other
# target flags, e.g. -mfma, so they could not use it).
#
# With ccache, set CCACHE_SLOPPINESS=pch_defines,time_macros (ccache's manual,
# "Precompiled headers"), or it compiles the TUs that use the header uncached.
# TTR_PCH=OFF checks that every header still includes what it uses.
option(TTR_PCH "Precompile the multiprecision header for the targets that include it most" ON)

function(ttr_precompile target)
  if(NOT TTR_PCH)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:${PROJECT_SOURCE_DIR}/reference/core/multiprecision.hpp>")
  if(ARGN)
    set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()
