// Tests for specdec/math/sampling_params.hpp: validate() and its bounds.
#include <catch2/catch.hpp>
#include <cmath>
#include <specdec/math/sampling_params.hpp>
#include <specdec/math/warp.hpp>
#include <vector>

using specdec::sampling_params;

TEST_CASE("sampling_params: temperature is 0 or large enough that 1 / temperature is finite") {
  SECTION("min_temperature is the least float with a finite reciprocal") {
    CHECK(std::isfinite(1.0f / sampling_params::min_temperature));
    CHECK_FALSE(std::isfinite(1.0f / std::nextafter(sampling_params::min_temperature, 0.0f)));
  }
  SECTION("a temperature below it is refused at validation, not mid-run") {
    // Issue 10: 1e-39 passed validate() and failed inside warp ("probabilities must have a
    // positive, finite total").
    sampling_params sp;
    sp.temperature = 1e-39f;
    REQUIRE_THROWS_WITH(sp.validate(),
                        "sampling_params.temperature: must be 0 (greedy) or >= min_temperature "
                        "(about 2.94e-39, where 1 / temperature stays finite), got 1.00000022e-39");
    sp.temperature = std::nextafter(sampling_params::min_temperature, 0.0f);
    CHECK_THROWS(sp.validate());
    sp.temperature = 0.0f;
    CHECK_NOTHROW(sp.validate());
  }
  SECTION("at min_temperature warp gives the argmax all the mass, finite") {
    sampling_params sp;
    sp.temperature = sampling_params::min_temperature;
    REQUIRE_NOTHROW(sp.validate());
    const std::vector<float> logits{0.5f, 2.0f, -1.0f, 1.999f};
    std::vector<float> probs(logits.size());
    specdec::warp(logits, sp, probs);
    CHECK(probs[1] == Approx(1.0f));
    for (const std::size_t i : {0, 2, 3}) CHECK(probs[i] < 1e-30f);  // exp's floor, not NaN
  }
}
