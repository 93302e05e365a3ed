#include "gate/domain_note.hpp"

#include <fmt/format.h>

namespace ttr {

std::string domain_line(const CheckResult& r, const std::vector<DomainViolation>& violated) {
  std::string s = fmt::format("domain: the inputs leave the guaranteed domain of the {} {} form in {} "
                              "(docs/domains.md; a note, not a failure):",
                              form_name(r.model_form), direction_name(r.direction), tier_name(r.dtype));
  for (std::size_t i = 0; i < violated.size(); ++i) {
    const DomainViolation& v = violated[i];
    s += fmt::format("{} {} = {:.6g} > {:.6g} ({}'s largest finite value{})", i ? ";" : "", v.condition, v.value,
                     v.limit, v.format,
                     v.rounding ? "; an estimate of the form's rounding noise: past it a non-finite result "
                                  "comes from the form's own rounding, not from an exact value out of range "
                                  "(the range trace's float64 may overflow from the same growth)"
                                : "");
  }
  return s;
}

nlohmann::json domain_json(const CheckResult& r, const std::vector<DomainViolation>& violated) {
  nlohmann::json list = nlohmann::json::array();
  for (const DomainViolation& v : violated) {
    nlohmann::json item = {{"condition", v.condition},
                           {"bound", v.bound},
                           {"format", v.format},
                           {"value", json_number(v.value)},
                           {"limit", json_number(v.limit)}};
    if (v.rounding) item["rounding"] = true;
    list.push_back(std::move(item));
  }
  return {{"form", form_name(r.model_form)}, {"violated", std::move(list)}};
}

nlohmann::json check_report_json(const NamedCheck& c, const std::vector<DomainViolation>& violated) {
  nlohmann::json doc = report_json("check", {c});
  if (!violated.empty()) doc["checks"][0]["domain"] = domain_json(c.second, violated);
  return doc;
}

void print_check_table(std::FILE* out, const NamedCheck& c, const std::vector<DomainViolation>& violated) {
  print_table(out, {c});
  if (!violated.empty()) std::fprintf(out, "%s: %s\n", c.first.c_str(), domain_line(c.second, violated).c_str());
}

}  // namespace ttr
