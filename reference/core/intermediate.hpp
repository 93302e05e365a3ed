// Names of a form's intermediates, for diagnostics that run the form: the range
// trace (gate/range.hpp) reports the first value that leaves a kernel format's
// range by the name of the intermediate being computed ("Λ_t = P_t(Λ_0)",
// "decayed keys K ⊙ e^{b_last − b}", ...). A form opens a NamedIntermediate scope
// around each phase; the name is a thread-local pointer, set and restored per
// phase (outside inner loops), and read only when a trace records something.
// `output_of_the_layer`: the phase computes a final output (KLA-K's lambda_T),
// whose value beyond the format is the faithful ±inf rather than a failure
// of the form, so the trace ignores it.
#pragma once

namespace ttr {

struct IntermediateName {
  const char* name = nullptr;
  bool output_of_the_layer = false;
};

inline IntermediateName& current_intermediate() {
  thread_local IntermediateName n;
  return n;
}

class NamedIntermediate {
 public:
  explicit NamedIntermediate(const char* name, bool output_of_the_layer = false) : saved_(current_intermediate()) {
    current_intermediate() = {name, output_of_the_layer};
  }
  ~NamedIntermediate() { current_intermediate() = saved_; }
  NamedIntermediate(const NamedIntermediate&) = delete;
  NamedIntermediate& operator=(const NamedIntermediate&) = delete;

 private:
  IntermediateName saved_;
};

}  // namespace ttr
