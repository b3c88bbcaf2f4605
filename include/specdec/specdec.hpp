// specdec/specdec.hpp - everything: include this one header to use the library.
//
// The data path, in the order of the folders:
//   tokens -> concepts/ (the model and drafter contracts) -> draft/ (who proposes)
//   -> model (yours) -> math/ (logits -> distributions) -> verify/ (who judges)
//   -> decoder.hpp (accepted tokens, caches rolled back) -> stats.hpp
#pragma once

#include "specdec/batch/batch_stats.hpp"
#include "specdec/batch/k_policy.hpp"
#include "specdec/batch/sequence_view.hpp"
#include "specdec/batch_decoder.hpp"
#include "specdec/concepts/batch_language_model.hpp"
#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/hidden_state_model.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/cost/calibrate.hpp"
#include "specdec/decode/options.hpp"
#include "specdec/decode/pipeline.hpp"
#include "specdec/decoder.hpp"
#include "specdec/draft/composed_drafter.hpp"
#include "specdec/draft/eagle_attention.hpp"
#include "specdec/draft/eagle_drafter.hpp"
#include "specdec/draft/eagle_head.hpp"
#include "specdec/draft/hidden_capture.hpp"
#include "specdec/draft/medusa_drafter.hpp"
#include "specdec/draft/medusa_heads.hpp"
#include "specdec/draft/model_drafter.hpp"
#include "specdec/draft/ngram_cache.hpp"
#include "specdec/draft/ngram_drafter.hpp"
#include "specdec/draft/no_drafter.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sample.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/softmax.hpp"
#include "specdec/math/warp.hpp"
#include "specdec/stats.hpp"
#include "specdec/tree/tree_plan.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/block.hpp"
#include "specdec/verify/greedy.hpp"
#include "specdec/verify/rejection.hpp"
#include "specdec/verify/result.hpp"
