// The layer registry: every layer's spec and what implements it — CPU reference
// forms per direction and tier, device kernels per backend — built from the one
// declaration of each layer (oracles/layers/layers.def). Dispatch goes through
// these entries; nothing tests a layer's name.
#pragma once

#include <array>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "oracles/runner.hpp"
#include "oracles/spec.hpp"

namespace ttr {

// The number of scalar tiers (tiers.def), the size of a form's runner table.
inline constexpr std::size_t kTierCount = [] {
  std::size_t n = 0;
#define TTR_TIER(t) ++n;
#include "oracles/tiers.def"
#undef TTR_TIER
  return n;
}();

// A CPU reference form in one direction: one runner per tier (Tier order).
struct FormImpl {
  Form form = Form::sequential;
  Direction direction = Direction::forward;
  std::array<LayerRunner, kTierCount> runners{};
  // TTR_OWN_ALGORITHM (layers.def): another algorithm than the sequential form's,
  // so its model does not describe a kernel of another form.
  bool own_algorithm = false;
};

// A device kernel: the algorithm it runs (its form) and its launcher.
struct KernelImpl {
  Backend backend = Backend::cuda;
  Form form = Form::chunk;
  Direction direction = Direction::forward;
  KernelRunner run = nullptr;
  std::string name() const;  // "cuda-chunk", "cuda-sequential"
};

struct LayerEntry {
  LayerSpec spec;
  std::vector<FormImpl> forms;       // in Form order within each direction
  std::vector<KernelImpl> kernels;

  bool has_form(Form f, Direction d = Direction::forward) const;
  // The declared form, nullptr when there is none.
  const FormImpl* form(Form f, Direction d = Direction::forward) const;
  // The forms of a direction, in Form order.
  std::vector<Form> form_list(Direction d = Direction::forward) const;
  // InputError when the layer lacks the form (naming the forms it has).
  LayerRunner runner(Form f, Tier t, Direction d = Direction::forward) const;
  // nullptr when there is no such kernel.
  const KernelImpl* kernel(Backend b, Form f, Direction d = Direction::forward) const;
  std::vector<const KernelImpl*> kernel_list(Backend b, Direction d = Direction::forward) const;
};

// Every layer: the declared ones in layers.def order, then any registered at run
// time (register_layer). Stable references: entries are never moved.
const std::deque<LayerEntry>& registry();
// Adds a layer through the public path (a test-only layer, a plugin): its spec,
// forms and kernels. InputError when the name is taken. Not thread-safe against
// concurrent readers: register before running anything.
const LayerEntry& register_layer(LayerEntry entry);
// Removes a layer added by register_layer — the last one added, so that no other
// entry moves (a test's layer, at the end of its suite). std::logic_error for a
// declared layer or one that is not the last.
void unregister_layer(const std::string& name);
// InputError naming the layer and listing the known ones.
// By value (a view): a reference parameter bound to a temporary string would make
// g++ 13 warn (-Wdangling-reference) at every `const LayerEntry& e = find_layer("…")`.
const LayerEntry& find_layer(std::string_view name);
// "sequential" (also FLA's "fused_recurrent" and "recurrent"), "chunk", "scan",
// "chunk_unscaled", "scan_unscaled", "sequential_dg_sum", "chunk_tf32_intra".
Form parse_form(const std::string& s);
Direction parse_direction(const std::string& s);

// Runs a layer form: validates nothing (see validate.hpp), dispatches on form,
// direction and tier.
LayerResult run_layer(const LayerEntry& layer, Form form, const Arith& arith, const TensorMap<double>& inputs,
                      const Config& cfg, int chunk_size = 64, Direction direction = Direction::forward);

}  // namespace ttr
