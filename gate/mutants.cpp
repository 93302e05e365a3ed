#include "gate/mutants.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <initializer_list>
#include <stdexcept>

#include "oracles/error.hpp"
#include "oracles/registry.hpp"
#include "oracles/slices.hpp"

namespace ttr {
namespace {

// The layers whose chunk and scan forms share an injection point: a family of
// the declaration (oracles/layers/layers.def), optionally only its layers with a
// decay gate `g` (the reference/family/ file named in each comment).
struct Group {
  const char* family;
  bool decayed = false;  // only the layers with a log-decay input g
};
const Group kGatedLinear{"gated_linear"};           // gated_linear_chunk.hpp
const Group kDecayedGatedLinear{"gated_linear", true};
const Group kDelta{"delta"};                        // delta_chunk.hpp
const Group kDecayedDelta{"delta", true};
const Group kGka{"gka"};
const Group kKla{"kalman"};

// Targets: `form` of every layer of each group that has it in `direction`, in
// declaration order (a backward form is found through the registry, so a layer
// that gains one is targeted without naming it here).
std::vector<MutantTarget> on(Form form, Direction direction, std::initializer_list<Group> groups) {
  std::vector<MutantTarget> t;
  for (const Group& g : groups)
    for (const LayerEntry& e : registry())
      if (e.spec.family == g.family && (!g.decayed || e.spec.input("g")) && e.has_form(form, direction))
        t.push_back({e.spec.name, form, direction});
  return t;
}
std::vector<MutantTarget> on(Form form, std::initializer_list<Group> groups) {
  return on(form, Direction::forward, groups);
}
// The layers of `groups` whose spec has the boolean config key `key`.
std::vector<MutantTarget> with_key(std::vector<MutantTarget> targets, const char* key) {
  std::erase_if(targets, [&](const MutantTarget& t) { return !find_layer(t.layer).spec.key(key); });
  return targets;
}
// One named layer (a mutant of a layer's own step, not of a shared core).
std::vector<MutantTarget> on(Form form, const char* layer) { return {{layer, form}}; }
std::vector<MutantTarget> operator+(std::vector<MutantTarget> a, const std::vector<MutantTarget>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The backward forms' bugs (reference/family/delta_chunk_backward.hpp,
// oracles/layers/delta_backward_forms.hpp): the chunkwise backward of the delta
// family, FLA's chunk_gated_delta_rule_bwd structure. Each is a bug of the kind
// reported against FLA's kernels (the story in its description).
template <class Add>
void add_backward(const Add& add) {
  const Form chunk = Form::chunk;
  const Direction bwd = Direction::backward;
  const auto delta = on(chunk, bwd, {kDelta}), decayed = on(chunk, bwd, {kDecayedDelta});
  {
    MutantConditions n;
    n.min_chunk_size = 32;  // a 16×16 sub-block structure only exists in a chunk of more than 16 tokens
    add(Mutant::wy_backward_offblock_dropped, "wy-backward-offblock-dropped",
        "UT/WY backward (prepare_wy_repr_bwd) computed on 16×16 sub-blocks of the chunk: dA = −Tᵀ dT Tᵀ keeps only "
        "its diagonal blocks, so dk and dβ miss the pairs across sub-blocks — right at C = 16, wrong at C = 64 "
        "(FLA #984: the WY backward's dk/dβ wrong at chunk size 64)",
        delta, n, "invisible for C ≤ 16 (the default gate's realistic case runs C = 64)");
  }
  {
    MutantConditions n;
    n.min_chunks = 2;
    add(Mutant::dg_revcumsum_not_reset, "dg-revcumsum-not-reset",
        "dg's reverse cumulative sum not reset at chunk boundaries (a global reverse cumsum where "
        "chunk_local_cumsum(reverse=True) is meant): every chunk's dg carries the sum of all later chunks' db",
        decayed, n);
  }
  add(Mutant::dg_revcumsum_exclusive, "dg-revcumsum-exclusive",
      "dg's chunk-local reverse cumulative sum off by one: dg_i = Σ_{t>i} db_t (exclusive) instead of Σ_{t≥i}",
      decayed);
  add(Mutant::dg_query_term_dropped, "dg-query-term-dropped",
      "dg misses the q·dq term: the gradient of the query decay q_t e^{b_t} (FLA's b_dg += sum(b_dq * b_q)) not "
      "added before the reverse cumsum",
      decayed);
  {
    MutantConditions n;
    n.inputs = {"h0"};
    add(Mutant::dh0_not_written, "dh0-not-written",
        "dh0 never stored: the initial state's gradient returned as zeros (the STORE_INITIAL_STATE_GRADIENT "
        "branch off)",
        delta, n);
  }
  add(Mutant::dht_ignored, "dht-ignored",
      "dht ignored: the backward state pass starts from zero instead of the final state's cotangent "
      "(USE_FINAL_STATE_GRADIENT off), so every gradient misses the path through ht",
      delta, {}, "invisible when the caller passes no dht (the default gate always draws one)");
  {
    MutantConditions n;
    n.min_chunks = 2;
    add(Mutant::dh_pass_undecayed, "dh-pass-undecayed",
        "backward state pass not decayed by the chunk's gate: dh_{n-1} = dh_n + … instead of Diag(e^{b_last}) dh_n "
        "+ … (the b_dh *= exp(b_g_last) line missing in chunk_bwd_dhu)",
        decayed, n);
  }
  add(Mutant::dbeta_sign_flipped, "dbeta-sign-flipped",
      "dβ returned with its sign flipped (the gradient of an erase gate 1 − β returned for β)", delta);
  add(Mutant::dq_scale_twice, "dq-scale-twice",
      "dq scaled by scale² (b_dq *= scale applied in the inter-chunk kernel and again after the intra-chunk sum)",
      delta, {}, "invisible when scale = 1");
  add(Mutant::dq_scale_missing, "dq-scale-missing",
      "dq returned without its factor scale (a scale = 1 fast path taken for any scale, as in FLA PR #1262)", delta,
      {}, "invisible when scale = 1");
  add(Mutant::dk_wy_term_dropped, "dk-wy-term-dropped",
      "dk misses the dw → dk contribution of the WY backward: β_t e^{b_t} (Tᵀ dW)_t never added to dk", delta);
  add(Mutant::dk_undecayed_key, "dk-undecayed-key",
      "the WY backward's dk term computed with the undecayed key: β_t (Tᵀ dW)_t instead of β_t e^{b_t} (Tᵀ dW)_t",
      decayed);
  {
    MutantConditions n;
    n.min_chunks = 2;
    add(Mutant::dv_state_gradient_late, "dv-state-gradient-late",
        "dv from the wrong chunk's state gradient: dΔ's state term (W ⊙ e^{b_last−b}) dh reads dh of the following "
        "chunk (index i_t + 1 instead of i_t); the last chunk reads none",
        delta, n);
  }
  {
    MutantConditions n;
    n.special = SpecialInput::strong_decay;
    add(Mutant::backward_gate_exp_unmasked, "backward-gate-exp-unmasked",
        "backward decay factors exp(b_t − b_s) formed for every pair of the chunk and the causal mask applied by "
        "multiplying (inf·0 = NaN in dq, dk, dg once a chunk's gates sum below exp's range)",
        decayed, n,
        "bit-identical to the correct form unless some span of one chunk has Σg < −88.7 (fp32 and the 16-bit "
        "policies) or < −709.8 (fp64)");
  }
  add(Mutant::ut_adjoint_transposed, "ut-adjoint-transposed",
      "the adjoint of T = (I + A)⁻¹ with its transposes misplaced: dA = −T dTᵀ T instead of −Tᵀ dT Tᵀ", delta);
  {
    MutantConditions n;
    n.config = {{"use_qk_l2norm_in_kernel", "true"}};
    add(Mutant::l2norm_backward_skipped, "l2norm-backward-skipped",
        "use_qk_l2norm_in_kernel: q and k normalised in the forward, but dq, dk returned as the gradients of the "
        "normalised q̂, k̂ (the l2norm backward dx = r(dy − y⟨y, dy⟩) never applied)",
        with_key(delta, "use_qk_l2norm_in_kernel"), n,
        "invisible without use_qk_l2norm_in_kernel (precond_* default to it; the default gate's `l2norm` case sets it)");
  }
  add(Mutant::dq_first_token_intra_dropped, "dq-first-token-intra-dropped",
      "localized: the first token of each chunk misses dq's intra-chunk term (the score-tile loop starts at row 1); "
      "one row in C, which a whole-tensor relative RMS dilutes",
      delta);
  {
    MutantConditions n;
    n.partial_last_chunk = true;
    add(Mutant::backward_last_partial_chunk_dropped, "backward-last-partial-chunk-dropped",
        "backward grid of floor(T/C) chunks instead of ceil(T/C): the last partial chunk's dq, dk, dv, dβ, dg stay 0 "
        "and dht passes it undecayed",
        delta, n);
  }
}

// GKA's chunk backward (reference/gka/chunk_backward.hpp): the adjoint of the chunk
// form with the Chebyshev solve differentiated by GKA Alg. 2 as derived. Each is a bug
// a port of Alg. 2 or of the §4.2 chunk adjoint makes; the gradients it touches are in
// its description (tests/gate/gate_test.cpp checks the gate fails it on those).
template <class Add>
void add_gka_backward(const Add& add) {
  const auto gka = on(Form::chunk, Direction::backward, {kGka});
  MutantConditions chebyshev;
  chebyshev.config = {{"solver", "chebyshev"}};
  add(Mutant::gka_lambda_gradient_dropped, "gka-lambda-gradient-dropped",
      "no gradient through the adaptive ridge λ_t = a‖H_t‖_F (GKA eq. (4)): d‖H_t‖_F misses a·dλ_t, so eq. (5)'s "
      "adjoint never sees the solve's dλ_t — dk, dg (and dβ, dhkk0) wrong, dq and dv right",
      gka, {}, "invisible under a fixed lambda (then λ_t has no gradient)");
  add(Mutant::gka_alg2_printed_q_sign, "gka-alg2-printed-q-sign",
      "GKA Alg. 2 exactly as printed: the reversed iteration recovers ξ_{i-2} with eqs. (59)/(60)'s + c_i q instead "
      "of the − c_i q that solving eq. (54) gives, so every recovered iterate, and dH = −Σ c_i dξ_i ξ_{i-1}ᵀ, is "
      "wrong — dk, dg (and dβ, dhkk0); dq (Lemma 2) right",
      gka, chebyshev);
  add(Mutant::gka_adjoint_recursion_sign, "gka-adjoint-recursion-sign",
      "eq. (61)'s adjoint recursion with one term's sign flipped: dξ_{i-1} = ν_i dξ_i − c_i Aᵀdξ_i + (ν_{i+1} − 1) "
      "dξ_{i+1} instead of − (ν_{i+1} − 1) dξ_{i+1} — dk, dg (and dβ, dhkk0); dq right",
      gka, chebyshev);
  add(Mutant::gka_chebyshev_adjoint_step_short, "gka-chebyshev-adjoint-step-short",
      "Alg. 2's reverse loop one step short (i = r..2, an `i > 1` for `i >= 1`): the first Chebyshev step's "
      "dH −= c_1 dξ_1 ξ_0ᵀ and dλ terms missing and the bounds' gradient (eqs. (62)–(63)) reading dξ_1 as dξ_0 — "
      "dk, dg (and dβ, dhkk0)",
      gka, chebyshev);
  add(Mutant::gka_adjoint_solve_step_short, "gka-adjoint-solve-step-short",
      "dq by Lemma 2 (eq. (53)) with one Chebyshev iteration fewer than the forward's: p_{r-1}(Aᵀ) dx instead of "
      "p_r(Aᵀ) dx (the adjoint solve launched with iters − 1) — dq",
      gka, chebyshev,
      "the change is the solver's progress in its last step (~25% of its remaining error at a = 0.02): far above "
      "fp32's model, not always above bf16's, and it shrinks as the solve converges (more iters, larger a)");
  {
    MutantConditions n;
    n.inputs = {"alpha"};
    add(Mutant::gka_dalpha_dropped, "gka-dalpha-dropped",
        "the α-connection's own gradient dα = ⟨dq̃, x − q̂⟩ never accumulated (α treated as a constant): dalpha "
        "returned as zeros, every other gradient right",
        gka, n);
  }
  add(Mutant::gka_dg_revcumsum_exclusive, "gka-dg-revcumsum-exclusive",
      "dg's chunk-local reverse cumulative sum off by one token: dg_i = Σ_{c>i} db_c instead of Σ_{c≥i} (GKA eqs. "
      "(26)–(34) in the cumulative-gate form) — dg",
      gka);
  {
    MutantConditions n;
    n.min_chunks = 2;
    add(Mutant::gka_dh_not_carried, "gka-dh-not-carried",
        "the backward state pass carries the value state's dS to the previous chunk but not the key state's dH "
        "(each chunk's dH_end taken as 0 but the last's dhkk): every chunk misses the later chunks' gradient "
        "through H — dk, dg (and dβ, dhkk0)",
        gka, n);
  }
}

std::vector<MutantInfo> build() {
  const Form chunk = Form::chunk, scan = Form::scan;
  std::vector<MutantInfo> c;
  const auto add = [&](Mutant id, const char* name, const char* description, std::vector<MutantTarget> targets,
                       MutantConditions needs = {}, const char* note = "") {
    c.push_back({id, name, description, std::move(targets), std::move(needs), note, false});
  };

  add(Mutant::causal_mask_strict, "causal-mask-strict",
      "intra-chunk causal mask off by one: scores kept for s < t instead of s <= t, so no token reads its own write",
      on(chunk, {kGatedLinear, kDelta, kGka}));
  {
    MutantConditions n;
    n.min_chunks = 2;
    add(Mutant::decay_after_update, "decay-after-update",
        "state passing adds the chunk's update before applying the chunk decay (h += k^T v; h *= exp(g_last) swapped)",
        on(chunk, {kDecayedGatedLinear, kDecayedDelta, kGka}), n);
    add(Mutant::gate_cumsum_not_reset, "gate-cumsum-not-reset",
        "cumulative log-gates not reset at chunk starts (a global cumsum where chunk_local_cumsum is meant): "
        "the chunk-initial state is decayed again by all earlier gates",
        on(chunk, {kDecayedGatedLinear, kDecayedDelta, kGka}), n);
  }
  add(Mutant::ut_beta_dropped, "ut-beta-dropped",
      "UT matrix A = tril(K W^T ⊙ Γ, -1) built without the Diag(β) row scaling", on(chunk, {kDelta}));
  add(Mutant::kaczmarz_eps_outside, "kaczmarz-eps-outside",
      "Kaczmarz coefficient η/‖k‖² + eps instead of η/(‖k‖² + eps): eps added where it guards nothing",
      on(chunk, "kaczmarz_delta_rule"), {},
      "changes β̃ by ≈ eps(1 + η/‖k‖⁴): relative effect ~eps = 1e-6 on unit-norm keys, so visible in fp64/fp32 "
      "but below bf16's resolution there; large (and inf/NaN at k = 0) for keys with ‖k‖² ≲ eps");
  add(Mutant::pgdn_unpreconditioned_write, "pgdn-unpreconditioned-write",
      "PGDN/PKDA write key k instead of the preconditioned k̃ = B ⊙ k (final_A_state still right)",
      on(chunk, "precond_gated_delta_rule") + on(chunk, "precond_kda"));
  add(Mutant::gka_constant_lambda, "gka-constant-lambda",
      "GKA ridge λ fixed at 0.25 (MesaNet's floor) instead of the adaptive λ_t = a‖H_t‖_F",
      on(chunk, {kGka}), {}, "invisible when the config itself fixes lambda = 0.25");
  {
    MutantConditions n;
    n.config = {{"solver", "chebyshev"}};
    add(Mutant::chebyshev_omega0_wrong, "chebyshev-omega0-wrong",
        "Chebyshev weight recursion ω_i = 4/(4 - ρ²ω_{i-1}) started at ω_0 = 1 instead of the configured omega0",
        on(chunk, {kGka}), n,
        "only with solver=chebyshev and omega0 != 1; the effect is the solver's remaining error after `iters` "
        "steps (≈5e-4 relative in o on the demo case, 30 iterations, a = 0.02): clear in fp64/fp32, of the order "
        "of the bf16 Chebyshev solve's own error");
  }
  add(Mutant::gka_norm_previous_token, "gka-norm-previous-token",
      "GKA ‖H‖_F (eq. (5)) read one token late: λ_t and Chebyshev's L use ‖H_{t-1}‖_F",
      on(chunk, {kGka}), {},
      "with a fixed lambda only Chebyshev's bound L and the `fro` diagnostic change (o is unchanged under "
      "solver=exact or cg)");
  add(Mutant::kla_gate_current_precision, "kla-gate-current-precision",
      "KLA-K mean gate f_t = ā/(ā² + p̄Λ_t) instead of ā/(ā² + p̄Λ_{t-1}) (off by one between the two scans)",
      on(chunk, {kKla}) + on(scan, {kKla}), {}, "invisible where p̄ = 0 (f_t = 1/ā does not read Λ)");
  {
    MutantConditions n;
    n.tiers = {Tier::bf16, Tier::fp16};
    add(Mutant::accumulate_in_16bit, "accumulate-in-16bit",
        "products and readouts accumulate in the 16-bit storage format (bf16/fp16 accumulator, every partial sum "
        "rounded) instead of fp32",
        on(chunk, {kGatedLinear, kDelta, kGka}) + on(scan, {kGatedLinear, kKla}) + on(chunk, {kKla}), n,
        "a precision bug: identical to the correct form under the fp32/fp64/MPFR policies, which have no narrower "
        "format. On the demo case (K = V = 16, C = 16) it moves o by 2-4 u (GKA 10-15 u) where the correct form's "
        "error is 1-2 u: only an error model tight to the unit roundoff catches it; the gap grows with K and C");
  }
  {
    MutantConditions n;
    n.inputs = {"h0"};
    add(Mutant::h0_ignored, "h0-ignored", "initial state h0 ignored: the chunk/scan form starts from zero",
        on(chunk, {kGatedLinear, kDelta, kGka}) + on(scan, {kGatedLinear}), n, "gka also ignores hkk0");
  }
  add(Mutant::scale_applied_twice, "scale-applied-twice",
      "output scaled by scale² (scale folded into q by the caller and applied again by the kernel)",
      on(chunk, {kGatedLinear, kDelta}) + on(scan, {kGatedLinear}), {}, "invisible when scale = 1");
  {
    MutantConditions n;
    n.several_sequences = true;
    add(Mutant::state_leaks_across_heads, "state-leaks-across-heads",
        "state not reset between (batch, head) work items: each starts from the previous one's final state "
        "instead of its own h0",
        on(chunk, {kGatedLinear, kDelta, kGka}), n);
  }
  {
    MutantConditions n;
    n.partial_last_chunk = true;
    add(Mutant::last_partial_chunk_dropped, "last-partial-chunk-dropped",
        "floor(T/C) chunks launched instead of ceil(T/C): the last partial chunk's outputs stay 0 and the final "
        "state misses it",
        on(chunk, {kGatedLinear, kDelta, kGka}), n);
  }
  {
    MutantConditions n;
    n.min_chunks = 4;  // the chunked scan's Blelloch tree over the aggregates composes P ⊕ L only from 4 leaves
    add(Mutant::scan_operands_swapped, "scan-operands-swapped",
        "Blelloch down-sweep composes L ⊕ P instead of P ⊕ L (a commutative-sum scan reused for a "
        "non-commutative composition)",
        on(scan, {kDecayedGatedLinear, kKla}) + on(chunk, {kKla}), n,
        "invisible where the composition commutes: linear_attn's affine maps have unit factors");
  }
  {
    MutantConditions n;
    n.min_chunks = 2;
    add(Mutant::scan_carry_inclusive, "scan-carry-inclusive",
        "two-level chunked scan: chunk c's carry-in is the inclusive prefix of the aggregates (its own included) "
        "instead of the exclusive one",
        on(chunk, {kKla}), n);
  }
  {
    MutantConditions n;
    n.special = SpecialInput::strong_decay;
    add(Mutant::gate_exp_unmasked, "gate-exp-unmasked",
        "chunk decay factors exp(b_t − b_s) computed for every pair and the causal mask applied by multiplying "
        "(inf·0 = NaN above the diagonal once a chunk's gates sum below exp's range)",
        on(chunk, {kDecayedGatedLinear, kDecayedDelta}), n,
        "bit-identical to the correct form unless some span of one chunk has Σg < −88.7 (fp32 and the 16-bit "
        "policies) or < −709.8 (fp64): realistic gates (≈ −0.05 per token) never; g = log(1e-30) in two tokens does");
  }
  {
    MutantConditions n;
    n.special = SpecialInput::zero_key;
    add(Mutant::kaczmarz_eps_dropped, "kaczmarz-eps-dropped",
        "Kaczmarz coefficient η/‖k‖² with no eps (KLA-Z eq. (3) with eps = 0): +inf, then NaN, at a zero key",
        on(chunk, "kaczmarz_delta_rule"), n,
        "NaN only where ‖k‖² = 0 in the kernel's arithmetic; elsewhere off by ≈ eps/‖k‖² relative (1e-6 on unit "
        "keys: below bf16's resolution, of the order of fp32's model error)");
  }
  {
    MutantConditions n;
    n.config = {{"solver", "chebyshev"}};
    n.special = SpecialInput::zero_write_prefix;
    add(Mutant::gka_zero_norm_unguarded, "gka-zero-norm-unguarded",
        "GKA tokens with H_t = 0 (so ‖H_t‖_F = 0 and λ_t = 0) not special-cased: Chebyshev's ρ = 0/0 and step "
        "2/(L + μ) = 2/0 make x_t and o_t NaN",
        on(chunk, {kGka}), n,
        "bit-identical to the correct form unless some H_t is exactly 0 (β = 0 or k = 0 at every token since the "
        "start, no hkk0); also NaN under solver=exact (a singular solve); cg stops at pᵀAp = 0 and is unaffected");
  }
  // The backward bugs are planted in the CUDA chunk backward kernels too
  // (gpu/family/delta_chunk_backward.cu and gpu/gka/chunk_backward.cu name each
  // one's stage).
  const std::size_t first_backward = c.size();
  add_backward(add);
  add_gka_backward(add);
  for (std::size_t i = first_backward; i < c.size(); ++i) c[i].cuda = true;
  // Varlen bugs (FLA #836, #837, PR #955), planted in the slicer (oracles/slices.hpp):
  // they need a varlen batch (cu_seqlens) and are proven by tests/varlen/varlen_mutants_test.cpp.
  {
    MutantConditions n;
    n.inputs = {"cu_seqlens"};
    add(kVarlenStateLeaks, "varlen-state-leaks",
        "state not reset at a sequence start: sequence n starts from sequence n-1's final state instead of its h0",
        on(chunk, {kGatedLinear, kDelta, kGka}), n);
    add(kVarlenChunkStraddles, "varlen-chunk-straddles",
        "chunk indices of the packed row ignore sequence starts: a boundary inside a chunk is not seen and the "
        "sequences either side run as one",
        on(chunk, {kGatedLinear, kDelta, kGka, kKla}), n,
        "invisible when every boundary lies on the chunk grid (cu_seqlens[n] a multiple of C)");
    n.inputs = {"cu_seqlens", "h0"};
    add(kVarlenDh0FromPrevious, "varlen-dh0-from-previous",
        "backward: dh0 of sequence n written from sequence n-1's (an off-by-one sequence index in the state gradient)",
        on(Form::chunk, Direction::backward, {kGatedLinear, kDelta}), n,
        "backward direction only (run --backward, check --backward): the forward outputs are unchanged");
  }
  return c;
}

}  // namespace

const char* special_input_text(SpecialInput s) {
  switch (s) {
    case SpecialInput::none: return "";
    case SpecialInput::strong_decay: return "strong decays: a chunk whose log-gates sum below -88.7 (fp32) / -709.8 (fp64)";
    case SpecialInput::zero_key: return "a zero key (‖k‖² = 0 in the kernel's arithmetic)";
    case SpecialInput::zero_write_prefix: return "H_t = 0 at some token: β = 0 from the sequence start, no hkk0";
  }
  return "";
}

void plant_special_input(SpecialInput s, const LayerSpec& spec, TensorMap<double>& inputs) {
  const auto with_role = [&](Role role) -> Tensor<double>* {
    for (const TensorSpec& t : spec.inputs)
      if (t.role == role && inputs.count(t.name)) return &inputs.at(t.name);
    return nullptr;
  };
  switch (s) {
    case SpecialInput::none: return;
    case SpecialInput::strong_decay: {
      Tensor<double>* g = with_role(Role::log_decay);
      if (!g) throw InputError(fmt::format("layer '{}' has no log-decay input to make strong", spec.name));
      // bf16-rounded log(1e-30) = −69.0: two such tokens overflow fp32's exp, eleven fp64's.
      for (double& x : g->data) x = -69.0;
      return;
    }
    case SpecialInput::zero_key: {
      Tensor<double>* k = with_role(Role::key);
      if (!k) throw InputError(fmt::format("layer '{}' has no key input to zero", spec.name));
      const std::int64_t T = k->shape.at(1), H = k->shape.at(2), K = k->shape.at(3);
      for (std::int64_t r = 0; r < k->numel() / K; ++r)
        if ((r / H) % T % 5 == 0) std::fill_n(k->data.begin() + r * K, K, 0.0);
      return;
    }
    case SpecialInput::zero_write_prefix: {
      const TensorSpec* beta = spec.input("beta");
      if (!beta || !inputs.count("q")) throw InputError(fmt::format("layer '{}' has no write gate beta", spec.name));
      const Tensor<double>& q = inputs.at("q");
      Tensor<double> b({q.shape.at(0), q.shape.at(1), q.shape.at(2)}, 1.0);
      const std::int64_t T = q.shape[1], H = q.shape[2];
      for (std::int64_t r = 0; r < b.numel(); ++r)
        if ((r / H) % T < 3) b.data[r] = 0.0;
      inputs["beta"] = std::move(b);
      for (const TensorSpec& t : spec.inputs)
        if (!t.required && (t.role == Role::state || t.role == Role::psd_matrix)) inputs.erase(t.name);
      return;
    }
  }
}

bool MutantInfo::affects(const std::string& layer, Form form, Direction direction) const {
  for (const auto& t : targets)
    if (t.layer == layer && t.form == form && t.direction == direction) return true;
  return false;
}

const std::vector<MutantInfo>& mutant_catalogue() {
  static const std::vector<MutantInfo> c = build();
  return c;
}

const MutantInfo& mutant_info(Mutant m) {
  for (const auto& e : mutant_catalogue())
    if (e.id == m) return e;
  throw std::invalid_argument("mutant_info: Mutant::none has no catalogue entry");
}

const char* mutant_name(Mutant m) { return m == Mutant::none ? "none" : mutant_info(m).name.c_str(); }

Mutant parse_mutant(const std::string& name) {
  std::string known = "none";
  for (const auto& e : mutant_catalogue()) {
    if (e.name == name) return e.id;
    known += ", " + e.name;
  }
  if (name == "none") return Mutant::none;
  throw InputError(fmt::format("unknown mutant '{}' (known: {})", name, known));
}

Mutant parse_cuda_mutant(const std::string& name) {
  const Mutant m = parse_mutant(name);
  if (m == Mutant::none || mutant_info(m).cuda) return m;
  std::vector<std::string> cuda;
  for (const auto& e : mutant_catalogue())
    if (e.cuda) cuda.push_back(e.name);
  throw InputError(fmt::format("mutant '{}' is planted in the CPU forms only; the CUDA kernels carry these: {}", name,
                               fmt::join(cuda, ", ")));
}

std::vector<const MutantInfo*> mutants_for(const std::string& layer, Form form, Direction direction) {
  std::vector<const MutantInfo*> out;
  for (const auto& e : mutant_catalogue())
    if (e.affects(layer, form, direction)) out.push_back(&e);
  return out;
}

}  // namespace ttr
