// json_check: reads specdec-generate --json output on stdin and checks it is exactly one JSON
// object with the documented fields (docs/llama2c.md, "--json"). Prints "json ok: <text>" and
// exits 0, or says what is missing and exits 1. Used by the specdec_generate.json CTest.
#include <cstdio>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

int main() {
  try {
    const auto j = nlohmann::json::parse(std::cin);  // throws on trailing text after the object
    if (!j.is_object()) throw std::runtime_error("not an object");
    for (const char* p : {"/request/prompt",
                          "/request/prompt_tokens",
                          "/request/max_new_tokens",
                          "/options/model",
                          "/options/sampling/temperature",
                          "/options/draft/kind",
                          "/options/draft/draft_max",
                          "/options/draft/draft_min",
                          "/model/context",
                          "/text",
                          "/tokens",
                          "/stop_reason",
                          "/stats/generated_tokens",
                          "/stats/target_calls",
                          "/stats/steps",
                          "/stats/tokens_per_target_call",
                          "/stats/tokens_per_step",
                          "/stats/drafted_tokens",
                          "/stats/accepted_tokens",
                          "/stats/acceptance_rate",
                          "/stats/acceptance_by_position",
                          "/stats/seconds/draft",
                          "/stats/seconds/target",
                          "/stats/seconds/verify",
                          "/stats/seconds/decode",
                          "/stats/tokens_per_second"})
      if (!j.contains(nlohmann::json::json_pointer(p)))
        throw std::runtime_error(std::string("missing ") + p);
    if (j["stats"]["generated_tokens"] != j["tokens"].size())
      throw std::runtime_error("stats.generated_tokens differs from the number of tokens");
    for (const auto& a : j["stats"]["acceptance_by_position"])
      if (!a.contains("position") || !a.contains("rate"))
        throw std::runtime_error("acceptance_by_position: an entry without position or rate");
    std::printf("json ok: %s\n", j["text"].get<std::string>().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "json_check: %s\n", e.what());
    return 1;
  }
}
