// Variable-length batches, FLA's convention (docs/varlen.md): an optional input
// `cu_seqlens`, I64 of shape [N+1], the cumulative offsets of N sequences packed
// into one batch row (B = 1): sequence n is tokens [cu_seqlens[n], cu_seqlens[n+1]).
// Per-token tensors ([B, T, ...]) are then cut at these offsets, and per-sequence
// tensors ([B, H, ...] without T: h0, ht, dh0, dht, hkk0, initial_A_state, ...)
// have N in place of B.
//
// This header is the light part (spec entry, what each tensor's dims say about
// its batch and head axes, the checks of the offsets): validation and the specs
// use it without any runner. Running a layer on the slices is oracles/slices.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/io/safetensors.hpp"
#include "oracles/spec.hpp"
#include "reference/core/tensor.hpp"

namespace ttr {

inline constexpr const char* kCuSeqlens = "cu_seqlens";

// The spec entry every layer gets (added once, by the registry and layer_specs):
// optional, I64, dims {"N+1"}, not differentiable.
TensorSpec cu_seqlens_spec();
// Appends cu_seqlens to `spec`'s inputs unless it is there already.
void add_varlen_input(LayerSpec& spec);

// What a tensor's symbolic dims say about its axes, the slicer's whole knowledge
// of a layer (no per-layer code):
//  per_token    dims start B, T        (q, k, v, g, beta, o, do, dq, ...): cut at the offsets
//  per_sequence dims start B, not T    (h0, ht, dh0, dht, hkk0, ...): row n belongs to sequence n
//  per_head     dims start H           (KLA-K's a_bar, PDN's log_atk_scale, their gradients):
//               shared by every sequence; gradients of it are summed over sequences
//  offsets      cu_seqlens itself
//  other        anything else: refused by the slicer (no layer has one today)
enum class AxisKind { per_token, per_sequence, per_head, offsets, other };
AxisKind axis_kind(const TensorSpec& t);
// Position of the head axis H for that kind (per_token 2, per_sequence 1,
// per_head 0), or -1 where dims do not have H there.
int head_axis(const TensorSpec& t);

// Checks a raw cu_seqlens tensor as read from `source` (I64, rank 1, at least two
// entries, starting at 0, non-decreasing): InputError naming the file, the tensor
// and the offending element otherwise. Returns the offsets.
std::vector<std::int64_t> read_cu_seqlens(const io::RawTensor& raw, const std::string& source);

// The offsets held by an input map's cu_seqlens (as validate_inputs stores it:
// a double tensor of integral values); empty when there is none.
std::vector<std::int64_t> cu_seqlens_of(const TensorMap<double>& inputs);

}  // namespace ttr
