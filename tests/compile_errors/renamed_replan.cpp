// Must NOT compile, and say what to write instead: code written for the speed policy's former
// field name, `options.replan = speed_policy(cost)`, gets one error naming generate_options::policy.
#include <specdec/specdec.hpp>

int main() {
  specdec::generate_options options;
  options.replan = specdec::speed_policy(specdec::step_cost_model{});
  return static_cast<int>(options.max_new_tokens);
}
