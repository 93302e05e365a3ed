// One case of a layer's built-in suite (oracles/vectors.hpp), with its layer entry and
// config bound: what a test that runs a named case through run_layer and the judge needs.
#pragma once

#include <stdexcept>
#include <string>

#include "oracles/registry.hpp"
#include "oracles/vectors.hpp"

namespace ttr::test {

struct SuiteCase {
  const LayerEntry& e;
  VectorCase c;
  Config cfg;
  SuiteCase(const std::string& layer, const std::string& suite, const std::string& name) : e(find_layer(layer)) {
    bool found = false;
    for (const VectorCase& v : suite_cases(e.spec, suite))
      if (v.name == name) c = v, found = true;
    if (!found) throw std::logic_error(layer + ": no case '" + name + "' in suite '" + suite + "'");
    cfg = Config::make(e.spec, c.config);
  }
  // The case's gradients by one form in one arithmetic (chunk size 64, FLA's).
  TensorMap<double> backward(Form f, Arith a, const TensorMap<double>& in) const {
    return run_layer(e, f, a, in, cfg, 64, Direction::backward).values;
  }
};

}  // namespace ttr::test
