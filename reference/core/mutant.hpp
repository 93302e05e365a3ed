// The mutant switch: deliberately broken variants of the chunk and scan forms,
// selectable at run time, so that the gate can prove it has teeth (a gate that
// passes a kernel with a realistic bug is worthless, and the only way to know is
// to hand it such kernels). Each value names one bug a real kernel port makes;
// the catalogue with names, descriptions and the (layer, form, direction)
// triples each bug affects is gate/mutants.{hpp,cpp}.
//
// Only the chunk and scan forms, forward and backward, read the switch (and, in
// builds with TTR_CUDA_MUTANTS, the CUDA chunk backward kernels of the delta
// family, which their binding hands the active mutant: gpu/core/mutant.cuh). The
// sequential forms are the oracle's definitions and never read it: a mutant
// active while an oracle runs cannot change it.
//
// Cost: mutated() is one thread-local load and a compare. The forms call it per
// chunk, per token or per sequence — never inside the innermost loops — so the
// unmutated forms run as before, and with no mutant active (the default) they
// compute bit-identically what they computed before the switch existed.
//
// Thread-local rather than global: the scope set around one run (`ttrcheck run
// --mutant`, the gate's candidate run, a test) must not leak into runs on other
// threads (a parallel gate or test runner running the oracle meanwhile). The
// forms are single-threaded, so a scope covers the whole run it encloses.
#pragma once

#include "reference/core/mutant_id.hpp"

namespace ttr {

namespace mutant_detail {
// constinit: no TLS init wrapper, a plain thread-local load.
inline constinit thread_local Mutant active = Mutant::none;
}  // namespace mutant_detail

// The mutant active on this thread (Mutant::none unless a MutantScope is open).
inline Mutant active_mutant() { return mutant_detail::active; }

// True when `m` is the active mutant: the test at each injection point.
inline bool mutated(Mutant m) { return mutant_detail::active == m; }

// Activates a mutant on this thread for the scope's lifetime and restores the
// previous one after (scopes nest; Mutant::none switches mutation off inside).
class MutantScope {
 public:
  explicit MutantScope(Mutant m) : saved_(mutant_detail::active) { mutant_detail::active = m; }
  ~MutantScope() { mutant_detail::active = saved_; }
  MutantScope(const MutantScope&) = delete;
  MutantScope& operator=(const MutantScope&) = delete;

 private:
  Mutant saved_;
};

}  // namespace ttr
