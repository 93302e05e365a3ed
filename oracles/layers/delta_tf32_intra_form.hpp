// The backward form `chunk_tf32_intra` of kda, precond_kda, gated_delta_rule and
// precond_gated_delta_rule:
// the chunkwise backward (delta_backward_forms' chunk_backward) with the intra-chunk
// products formed as flash-linear-attention forms them — both sides of the identity
// dg = q ⊙ dq − k ⊙ dk from tl.dot on fp32 operands, read as TF32. Per-key decay: the
// pairs across 16-token sub-chunks, as chunk_kda_bwd_intra (sub_chunk_products_backward_tf32);
// scalar decay: every pair of the chunk, as chunk_bwd_kernel_dqkwg
// (scalar_products_backward_tf32; both in reference/family/delta_chunk_backward.hpp;
// docs/validating-fla.md, "Failures"). A foreign kernel's algorithm: not swept unless
// named (oracles/spec.hpp).
#pragma once

#include "oracles/layers/adapter.hpp"
#include "oracles/run_layer.hpp"
#include "reference/family/delta_backward_core.hpp"

// The form's template parameter per tier (oracles/run_layer.hpp, forms::): as chunk's.
// Declared here, beside the adapters that have the form (as sequential_dg_sum).
namespace ttr::forms {
struct chunk_tf32_intra : chunk {};
}  // namespace ttr::forms

namespace ttr::layers {

template <class Layer>
struct delta_tf32_intra_form {
  // FLA's sub-chunk size in chunk_kda_bwd_intra (BC = 16 for its chunk size 64).
  static constexpr int kSubChunk = 16;
  template <class P>
  static void chunk_tf32_intra_backward(const TensorMap<typename P::acc>& raw, const Config& cfg,
                                        const FormOptions& opt, TensorMap<typename P::acc>& out) {
    Layer::backward(policy_inputs<P>(raw), cfg, ChunkDeltaCore<P>{opt.chunk_size, kSubChunk}, out);
  }
};

}  // namespace ttr::layers
