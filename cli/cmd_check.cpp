// `ttrcheck check`: someone's outputs judged against the oracle under the error
// model (gate/judge.hpp). Exit 0 pass, 1 fail, 2 bad usage or input. Every
// file is validated before the oracle is computed, and reports are written only
// once everything succeeded (docs/reports.md).
// The validation and judging are gate/check_request.cpp's, shared with the Python API.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "gate/check_request.hpp"
#include "gate/domain_note.hpp"
#include "gate/report.hpp"

namespace ttr::cli {

Command add_check(CLI::App& app) {
  struct Opts {
    std::string layer, in, candidate, dtype, policy, oracle, report, junit, form, oracle_tier = "auto";
    int chunk_size = 64, samples = ModelSpec{}.samples;
    std::uint64_t seed = 0;
    bool backward = false, strict_range = false, explain = false;
    std::vector<std::string> sets, not_judged;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("check", "compare a candidate's outputs with the oracle under the error model");
  cmd->add_option("--layer", o->layer, "layer name (see `ttrcheck layers`)")->required();
  cmd->add_option("--in", o->in, "inputs (safetensors)")->required();
  cmd->add_option("--candidate", o->candidate, "the outputs under test (safetensors, any floating dtype)")->required();
  cmd->add_option("--dtype", o->dtype, "the kernel's dtype bf16|fp16|fp32|fp64 (default: the candidate's 'o' dtype)");
  cmd->add_option("--policy", o->policy,
                  "a foreign kernel's arithmetic, sets the dtype: fp32|tf32|fp16|bf16-storage|bf16|fp64 "
                  "(tf32: fp32 kernel with TF32 matrix products; bf16-storage: fp32 kernel storing states and "
                  "operands in bf16; docs/arithmetic-policies.md)");
  cmd->add_flag("--explain-policy", o->explain,
                "also judge under every policy, smallest modelled error first, and name the first the candidate "
                "passes (the smallest arithmetic that explains its error)");
  cmd->add_option("--oracle", o->oracle, "a stored oracle (`ttrcheck oracle`) instead of computing it");
  cmd->add_option("--report", o->report, "write the JSON report here");
  cmd->add_option("--junit", o->junit, "write JUnit XML here");
  cmd->add_option("--form", o->form, "the algorithm the kernel runs, whose rounding the model propagates: "
                                     "chunk|scan|sequential (default: chunk if the layer has it, else sequential); "
                                     "sequential_dg_sum: FLA's fused-recurrent gla/simple_gla backward (dg by a "
                                     "reverse running sum); chunk_tf32_intra: FLA's chunk_kda/chunk_precond_kda/"
                                     "chunk_gated_delta_rule/chunk_precond_gated_delta_rule backward (intra-chunk products on TF32 "
                                     "operands, dg from q*dq - k*dk)");
  cmd->add_option("--chunk-size", o->chunk_size, "the kernel's chunk size C")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--samples", o->samples, "Monte Carlo arithmetic runs of the model")->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", o->seed, "seed of the model's perturbations (same seed: identical report)")
      ->check(seed_validator());
  add_backward_flag(*cmd, o->backward);
  add_set_option(*cmd, o->sets);
  cmd->add_flag("--strict-range", o->strict_range,
                "count range findings (NaN/Inf from intermediates beyond the dtype's range) as failures");
  cmd->add_option("--oracle-tier", o->oracle_tier,
                  "auto (double-double where its estimated own error is negligible, MPFR-256 slices elsewhere) | mpfr");
  cmd->add_option("--not-judged", o->not_judged,
                  "gradients (outputs) left unjudged: not required of the candidate, reported absent (repeatable; "
                  "e.g. a sampled slice's per-head gradient, which sums over rows left out)")
      ->delimiter(',');
  return [o]() {
    check_outputs({{"--in", o->in}, {"--candidate", o->candidate}, {"--oracle", o->oracle}},
                  {{"--report", o->report}, {"--junit", o->junit}});
    CheckRequest req;
    req.layer = o->layer;
    find_layer(o->layer);  // an unknown layer is named before any file is read
    req.inputs = io::read_safetensors(o->in);
    req.inputs_source = o->in;
    req.candidate = io::read_safetensors(o->candidate);
    req.candidate_source = o->candidate;
    if (!o->oracle.empty()) {
      req.oracle = io::read_safetensors(o->oracle);
      req.oracle_source = o->oracle;
    }
    req.dtype = o->dtype;
    req.policy = o->policy;
    req.form = o->form;
    req.chunk_size = o->chunk_size;
    req.samples = o->samples;
    req.seed = o->seed;
    req.backward = o->backward;
    req.strict_range = o->strict_range;
    req.oracle_mode = parse_oracle_mode(o->oracle_tier);
    req.sets = o->sets;
    req.not_judged = o->not_judged;
    std::vector<DomainViolation> domain;  // the guaranteed-domain note (gate/domain_note.hpp)
    const std::vector<NamedCheck> checks = {run_check(req, &domain)};
    const CheckResult& result = checks.front().second;

    if (!o->report.empty()) write_report(o->report, check_report_json(checks.front(), domain));
    if (!o->junit.empty()) {
      try {
        write_junit(o->junit, junit_xml("ttrcheck check", checks));
      } catch (...) {
        if (!o->report.empty()) std::remove(o->report.c_str());  // all or nothing
        throw;
      }
    }
    print_check_table(stdout, checks.front(), domain);
    if (o->explain) {
      // The report and exit code stay the check's (--dtype/--policy); the explanation is printed.
      const PolicyExplanation e = explain_policy(req);
      std::printf("\nwhich arithmetic explains the error (smallest first):\n");
      for (std::size_t i = 0; i < e.checks.size(); ++i) {
        const CheckResult& r = e.checks[i].second;
        double worst = 0.0;
        for (const TensorVerdict& t : r.tensors) worst = std::max(worst, t.present ? t.max_ratio : 0.0);
        std::printf("  %-13s max ratio %-10.3g %s\n", policy_name(r.dtype, r.policy).c_str(), worst,
                    r.pass ? "pass" : "FAIL");
        if (!e.notes[i].empty()) std::printf("                (%s)\n", e.notes[i].c_str());
      }
      std::printf("%s\n", e.best.empty() ? "explained by none of these policies"
                                          : ("explained by " + e.best + " (the smallest policy it passes)").c_str());
    }
    return result.pass ? 0 : 1;
  };
}

}  // namespace ttr::cli
