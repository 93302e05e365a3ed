// Fuzz harness: the CLI's config parsing. The input is text, one item a line:
//
//   line 1   layer name (ttrcheck layers); an unknown name ends the run
//   line 2   an arithmetic for --arith (bf16|fp16|fp32|fp64|mpfr:N|mpfi:N)
//   line 3   the metadata 'config' of an inputs file (a JSON object of strings),
//            or empty for none
//   line 4+  --set arguments, key=value
//
// through parse_arith, config_pairs (cli/common.cpp's metadata + --set merge)
// and Config::make, as `ttrcheck check|oracle|run` do.
//
// Invariants of an accepted config: every key with a default has a value; each
// value is canonical (making the config again from its own values gives the same
// values: a config recorded in metadata reads back to itself); numbers are finite
// and inside their key's range, integers integral, booleans true|false, choices
// among the key's choices. parse_arith's tier round-trips through arith_name.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/harness/fuzz_support.hpp"
#include "oracles/arith.hpp"
#include "oracles/config.hpp"
#include "oracles/config_pairs.hpp"
#include "oracles/error.hpp"
#include "oracles/layer_specs.hpp"

namespace {

using namespace ttr;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t nl = s.find('\n', at);
    out.push_back(s.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return out;
}

void check_config(const LayerSpec& spec, const Config& c) {
  for (const ConfigKey& key : spec.config) {
    if (key.default_value) TTR_FUZZ_REQUIRE(c.has(key.name), "defaulted key '" + key.name + "' has no value");
    if (!c.has(key.name)) continue;
    const std::string& text = c.text(key.name);
    switch (key.type) {
      case KeyType::number:
      case KeyType::integer: {
        const double x = c.number(key.name);
        TTR_FUZZ_REQUIRE(std::isfinite(x) && key.range.contains(x), "key '" + key.name + "' = " + text + " out of range");
        if (key.type == KeyType::integer) TTR_FUZZ_REQUIRE(std::floor(x) == x, "integer key '" + key.name + "' = " + text);
        break;
      }
      case KeyType::boolean:
        TTR_FUZZ_REQUIRE(text == "true" || text == "false", "boolean key '" + key.name + "' = " + text);
        break;
      case KeyType::choice: {
        bool known = false;
        for (const auto& ch : key.choices) known = known || ch == text;
        TTR_FUZZ_REQUIRE(known, "choice key '" + key.name + "' = " + text);
        break;
      }
    }
  }
  for (const auto& [k, v] : c.values()) TTR_FUZZ_REQUIRE(spec.key(k) != nullptr, "config holds unknown key '" + k + "'");
  // Canonical text is a fixed point: what we record in metadata reads back the same.
  std::vector<std::pair<std::string, std::string>> again(c.values().begin(), c.values().end());
  Config c2;
  try {
    c2 = Config::make(spec, again);
  } catch (const InputError& e) {
    TTR_FUZZ_REQUIRE(false, std::string("a config's own canonical values are refused: ") + e.what());
  }
  TTR_FUZZ_REQUIRE(c2.values() == c.values(), "canonical config values are not a fixed point");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<LayerSpec> specs = layer_specs();
  const std::vector<std::string> lines = lines_of(std::string(reinterpret_cast<const char*>(data), size));
  const LayerSpec* spec = nullptr;
  for (const auto& s : specs)
    if (s.name == lines[0]) spec = &s;
  if (lines.size() > 1) {
    try {
      const Arith a = parse_arith(lines[1]);
      TTR_FUZZ_REQUIRE(parse_arith(arith_name(a)).tier == a.tier && parse_arith(arith_name(a)).bits == a.bits,
                       "parse_arith(arith_name(a)) != a for '" + lines[1] + "'");
    } catch (const InputError&) {
    }
  }
  if (!spec) return 0;
  std::map<std::string, std::string> metadata;
  if (lines.size() > 2 && !lines[2].empty()) metadata = {{"layer", spec->name}, {"config", lines[2]}};
  const std::vector<std::string> sets(lines.size() > 3 ? lines.begin() + 3 : lines.end(), lines.end());
  try {
    const Config c = Config::make(*spec, config_pairs(metadata, spec->name, sets, "fuzz.safetensors"));
    check_config(*spec, c);
  } catch (const InputError&) {
  }
  return 0;
}
