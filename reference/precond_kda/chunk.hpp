// precond_kda, chunk form: precond_delta_chunk (precond_gated_delta_rule/chunk.hpp)
// with the per-key decay of KDA (PDN §3.4).
#pragma once

#include "reference/precond_gated_delta_rule/chunk.hpp"
