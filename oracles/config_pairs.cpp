#include "oracles/config_pairs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

#include "oracles/config.hpp"
#include "oracles/error.hpp"

namespace ttr {

std::vector<std::pair<std::string, std::string>> config_pairs(const std::map<std::string, std::string>& metadata,
                                                              const std::string& layer_name,
                                                              const std::vector<std::string>& sets,
                                                              const std::string& source) {
  std::vector<std::pair<std::string, std::string>> pairs;
  const auto lay = metadata.find("layer");
  const auto cfg = metadata.find("config");
  if (lay != metadata.end() && lay->second == layer_name && cfg != metadata.end()) {
    const nlohmann::json j = nlohmann::json::parse(cfg->second, nullptr, false);
    if (!j.is_object())
      throw InputError(fmt::format("{}: metadata 'config' is not a JSON object of strings", source));
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_string())
        throw InputError(fmt::format("{}: metadata 'config' key '{}' is not a string", source, it.key()));
      pairs.emplace_back(it.key(), it.value().get<std::string>());
    }
  }
  std::set<std::string> given;
  for (const auto& s : sets) {
    auto kv = parse_assignment(s);
    if (!given.insert(kv.first).second) throw InputError(fmt::format("--set: config key '{}' given twice", kv.first));
    std::erase_if(pairs, [&](const auto& p) { return p.first == kv.first; });  // --set overrides the file
    pairs.push_back(std::move(kv));
  }
  return pairs;
}

}  // namespace ttr
