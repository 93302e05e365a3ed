// The mutant identifiers alone (the switch is reference/core/mutant.hpp, the
// catalogue gate/mutants.hpp): a plain enum that device code can include too —
// the CUDA chunk kernels take the active mutant as a launch argument
// (gpu/core/mutant.cuh) where the CPU forms read a thread-local switch.
#pragma once

namespace ttr {

enum class Mutant : unsigned char {
  none,
  causal_mask_strict,           // intra-chunk output scores masked s < t instead of s <= t
  decay_after_update,           // chunk state decayed after the chunk's update is added
  gate_cumsum_not_reset,        // cumulative gates not reset at chunk starts
  ut_beta_dropped,              // UT matrix A without Diag(beta)
  kaczmarz_eps_outside,         // beta/||k||^2 + eps instead of beta/(||k||^2 + eps)
  pgdn_unpreconditioned_write,  // PGDN/PKDA write key k instead of B ⊙ k
  gka_constant_lambda,          // GKA lambda fixed at 0.25 instead of a·||H_t||_F
  chebyshev_omega0_wrong,       // Chebyshev weight schedule started at 1
  gka_norm_previous_token,      // GKA ||H||_F of the previous token
  kla_gate_current_precision,   // KLA-K f_t from Lambda_t instead of Lambda_{t-1}
  accumulate_in_16bit,          // products accumulate in bf16/fp16 instead of fp32
  h0_ignored,                   // initial state ignored: chunk forms start from zero
  scale_applied_twice,          // output scaled by scale^2
  state_leaks_across_heads,     // a head starts from the previous head's final state
  last_partial_chunk_dropped,   // floor(T/C) chunks: the last partial chunk is skipped
  scan_operands_swapped,        // Blelloch down-sweep composes L ⊕ P instead of P ⊕ L
  scan_carry_inclusive,         // chunked scan: chunk c's carry-in includes its own aggregate
  // NaN/Inf only on special inputs (what `ttrcheck fuzz --objective nan` hunts):
  gate_exp_unmasked,            // exp(b_t - b_s) for every pair, causal mask applied by multiplying
  kaczmarz_eps_dropped,         // Kaczmarz coefficient eta/||k||^2 with no eps at all
  gka_zero_norm_unguarded,      // GKA tokens with H_t = 0 (lambda = 0) not special-cased
  // Backward forms (reference/family/delta_chunk_backward.hpp and the delta adapters):
  wy_backward_offblock_dropped,  // UT backward: dA's off-diagonal 16x16 blocks dropped (dk/dβ wrong at C = 64)
  dg_revcumsum_not_reset,        // dg's reverse cumulative sum carried across chunk boundaries
  dg_revcumsum_exclusive,        // dg's reverse cumulative sum off by one (exclusive: dg_i = Σ_{t>i} db_t)
  dg_query_term_dropped,         // dg misses the q·dq term of the query decay
  dh0_not_written,               // dh0 left zero
  dht_ignored,                   // the backward state pass starts from zero instead of dht
  dh_pass_undecayed,             // backward state pass not decayed by the chunk's gate
  dbeta_sign_flipped,            // dβ returned negated
  dq_scale_twice,                // dq scaled by scale^2
  dq_scale_missing,              // dq not scaled at all
  dk_wy_term_dropped,            // dk misses the dw→dk term of the WY backward (T^T dW through K ⊙ e^b)
  dk_undecayed_key,              // the WY backward's dk term uses the undecayed key (e^b dropped)
  dv_state_gradient_late,        // dv's state term reads the following chunk's dh
  backward_gate_exp_unmasked,    // backward decay factors exp(b_t − b_s) for every pair, mask by multiplying
  ut_adjoint_transposed,         // dA = −T dTᵀ T instead of −Tᵀ dT Tᵀ
  l2norm_backward_skipped,       // use_qk_l2norm_in_kernel: dq, dk returned w.r.t. the normalised q, k
  dq_first_token_intra_dropped,  // the first token of each chunk misses dq's intra-chunk term
  backward_last_partial_chunk_dropped,  // floor(T/C) chunks in the backward: the last partial chunk's gradients 0
  // GKA's chunk backward (reference/gka/chunk_backward.hpp):
  gka_lambda_gradient_dropped,       // no gradient through λ_t = a‖H_t‖_F (d‖H_t‖_F misses a·dλ_t)
  gka_alg2_printed_q_sign,           // Alg. 2's reversed iteration with the print's + c_i q (eqs. (59)/(60))
  gka_adjoint_recursion_sign,        // eq. (61)'s −(ν_{i+1} − 1) dξ_{i+1} added with the wrong sign
  gka_chebyshev_adjoint_step_short,  // Alg. 2's reverse loop i = r..2: the first Chebyshev step's terms missing
  gka_adjoint_solve_step_short,      // dq̂ by Lemma 2 with r − 1 Chebyshev steps on the adjoint system
  gka_dalpha_dropped,                // the α-connection's gradient dα left zero
  gka_dg_revcumsum_exclusive,        // dg's chunk-local reverse cumulative sum exclusive (Σ_{t>i} db_t)
  gka_dh_not_carried,                // the backward state pass carries dS but not dH to the previous chunk
  // Varlen batches, planted in the slicer (oracles/slices.hpp), not in the forms:
  varlen_state_leaks,        // sequence n starts from sequence n-1's final state
  varlen_chunk_straddles,    // a boundary inside a chunk of the packed row is ignored
  varlen_dh0_from_previous,  // backward: dh0 of sequence n is that of sequence n-1
};

}  // namespace ttr
