// The layer registry: every layer's spec and the runners of its forms per tier.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "oracles/runner.hpp"
#include "oracles/spec.hpp"

namespace ttr {

inline constexpr std::size_t kTierCount = 7;

struct LayerEntry {
  LayerSpec spec;
  std::map<Form, std::array<LayerRunner, kTierCount>> forms;

  bool has_form(Form f) const { return forms.count(f) != 0; }
  // InputError when the layer lacks the form.
  LayerRunner runner(Form f, Tier t) const;
};

const std::vector<LayerEntry>& registry();
// InputError naming the layer and listing the known ones.
const LayerEntry& find_layer(const std::string& name);
Form parse_form(const std::string& s);

// Runs a layer: validates nothing (see validate.hpp), dispatches on form and tier.
LayerResult run_layer(const LayerEntry& layer, Form form, const Arith& arith, const TensorMap<double>& inputs,
                      const Config& cfg, int chunk_size = 64);

}  // namespace ttr
