#include <catch2/catch.hpp>
#include <specdec/verify/greedy.hpp>

#include <vector>

TEST_CASE("greedy: accepts the longest prefix equal to the argmax, then the argmax") {
  specdec::row_matrix logits(4, 3);
  logits << 0, 2, 1,   // argmax 1
            3, 3, 0,   // tie: lowest id, 0
            0, 0, 1,   // argmax 2
            5, 0, 0;   // argmax 0 (bonus)
  const specdec::logits_view v(logits.data(), 4, 3);
  const std::vector<specdec::token_id> all{1, 0, 2}, second_wrong{1, 1, 2}, first_wrong{2, 0, 2};
  auto r = specdec::verify_greedy(v, all);
  CHECK(r.accepted == 3);
  CHECK(r.next == 0);
  r = specdec::verify_greedy(v, second_wrong);
  CHECK(r.accepted == 1);
  CHECK(r.next == 0);
  r = specdec::verify_greedy(v, first_wrong);
  CHECK(r.accepted == 0);
  CHECK(r.next == 1);
  const specdec::logits_view one(logits.data(), 1, 3);
  r = specdec::verify_greedy(one, {});
  CHECK(r.accepted == 0);
  CHECK(r.next == 1);
}

TEST_CASE("greedy: the row count must match the drafts") {
  specdec::row_matrix logits(2, 3);
  logits.setZero();
  const specdec::logits_view v(logits.data(), 2, 3);
  const std::vector<specdec::token_id> three{0, 0, 0};
  REQUIRE_THROWS_WITH(specdec::verify_greedy(v, three),
                      "verify_greedy: target must have drafts.size() + 1 rows, has 2");
}
