// `check` as a function: a layer's inputs, a candidate's outputs and optionally a
// stored oracle, each as a TensorFile (read from disk by `ttrcheck check`, built
// from arrays by the Python API), validated the same way and judged by the one
// Judge (gate/judge.hpp). Both callers go through here, so a bad input gets the
// same one-line InputError and a candidate the same report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gate/error_model.hpp"
#include "gate/report.hpp"
#include "oracles/domain.hpp"
#include "oracles/io/safetensors.hpp"

namespace ttr {

struct CheckRequest {
  std::string layer;
  io::TensorFile inputs;
  std::string inputs_source = "inputs";        // names the inputs in errors (a path for the CLI)
  io::TensorFile candidate;
  std::string candidate_source = "candidate";
  std::optional<io::TensorFile> oracle;        // a stored oracle (`check --oracle`); else MPFR-256
  std::string oracle_source = "oracle";
  std::string dtype;                           // bf16|fp16|fp32|fp64; "" = the candidate's `o` storage dtype
  std::string policy;                          // fp32|tf32|fp16|bf16-storage|bf16|fp64 (gate/policies.hpp); "" = dtype's
  std::string form;                            // chunk|scan|sequential; "" = chunk if the layer has it
  int chunk_size = 64;
  int samples = ModelSpec{}.samples;
  std::uint64_t seed = 0;
  bool backward = false;
  bool strict_range = false;
  OracleMode oracle_mode = OracleMode::fast;   // the computed oracle: auto (dd, MPFR slices where needed) or mpfr
  std::vector<std::string> sets;               // "key=value" on top of the inputs' recorded config
  // The id's last part; "" = "<suite>.<case>" from the inputs' metadata, else
  // inputs_source's file name without ".inputs.safetensors"/".safetensors".
  std::string case_name;
  // Outputs (gradients, backward) of the layer left unjudged: not required of the
  // candidate and not compared if it holds them (reported absent). A sampled run's
  // per-head gradient that sums over rows the sample left out (python/ttrcheck/harness.py).
  std::vector<std::string> not_judged;
};

// Validates everything (InputError naming the source and tensor or key), then
// computes the oracle (unless given) and the model and judges. The id is
// "<layer>/<form>/<dtype>/<case>" plus "/backward" for the backward direction.
// With `domain`, also the conditions of the layer's guaranteed domain
// (docs/domains.md) the inputs violate for the check's form, direction and dtype
// (empty inside it): a note, the verdict is unchanged (gate/domain_note.hpp).
NamedCheck run_check(const CheckRequest& req, std::vector<DomainViolation>* domain = nullptr);

// `check --explain-policy`: the candidate judged under every policy of
// explain_order() (gate/policies.hpp; req.dtype and req.policy ignored), one
// oracle for all; `best` is the first it passes — the smallest arithmetic that
// explains its error — or "" when none does.
// `notes[i]`, when not empty, says why checks[i] failed where its ratio would
// mislead: its worst row's exact value is 0 and its model 0, so the dtype's
// subnormal floor alone bounds that row, and the first policy "explaining" the
// candidate is then the first whose floor is large enough (fp16's 2⁻²⁴), whatever
// arithmetic the kernel uses (docs/arithmetic-policies.md).
struct PolicyExplanation {
  std::vector<NamedCheck> checks;  // in explain_order()
  std::string best;
  std::vector<std::string> notes;  // one per check
};
PolicyExplanation explain_policy(const CheckRequest& req);

}  // namespace ttr
