// `check`'s note on the layer's guaranteed domain (oracles/domain.hpp,
// docs/domains.md): when the inputs violate a condition for the check's form,
// direction and dtype, the report's check gets a `domain` object and the table a
// line naming each violated condition with its value and limit. A note, not a
// failure: outside the domain a non-finite result may be a range finding.
// Kept beside the report code (gate/report.hpp) rather than in CheckResult, so
// that the gate's and the tests' many translation units do not depend on it.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gate/report.hpp"
#include "oracles/domain.hpp"

namespace ttr {

// "domain: the inputs leave the guaranteed domain of the chunk forward form in fp16
// (docs/domains.md; a note, not a failure): state = 65536 > 65504 (fp16's largest
// finite value); ..."
std::string domain_line(const CheckResult& r, const std::vector<DomainViolation>& violated);
// {"form": ..., "violated": [{"condition", "bound", "format", "value", "limit"}, ...]}
nlohmann::json domain_json(const CheckResult& r, const std::vector<DomainViolation>& violated);
// `check`'s report: report_json("check", {c}), with checks[0].domain exactly when
// `violated` is non-empty.
nlohmann::json check_report_json(const NamedCheck& c, const std::vector<DomainViolation>& violated);
// `check`'s table (print_table) and, when `violated` is non-empty, the domain line below it.
void print_check_table(std::FILE* out, const NamedCheck& c, const std::vector<DomainViolation>& violated);

}  // namespace ttr
