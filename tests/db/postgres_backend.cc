#include "history_test.h"

namespace tunefarm::testing {

std::vector<Backend> test_backends() { return {Backend::kPostgres}; }

}  // namespace tunefarm::testing
