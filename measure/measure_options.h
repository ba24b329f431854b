// Defaults of the measurement options, in one place: the agent's measurement code applies them,
// the tracker derives lease deadlines from the same timeout, and the tuner starts its jobs from
// them. Header-only so that the tracker need not link the measurement library.
#pragma once

#include "measure/tolerance.h"
#include "tunefarm/v1/common.pb.h"

namespace tunefarm {

inline constexpr int kDefaultRepeat = 3;
inline constexpr double kDefaultTimeoutS = 10.0;
// A tuning job's repeats last at least this long unless its spec says otherwise: shorter ones are
// dominated by timer resolution and launch overhead, and rank small kernels by noise.
inline constexpr int kDefaultTuningMinRepeatMs = 50;
// A GPU job's: every run there is timed by events of its own, launch overhead excluded, and starts
// with the L2 cleared (measure/cuda_runner.cc), which costs tens of microseconds: 50 ms of a 5 us
// kernel would be ten thousand clears, 10 ms averages the events' half-microsecond resolution
// over two thousand runs.
inline constexpr int kDefaultGpuTuningMinRepeatMs = 10;

// `options` with every field left at zero taken from `defaults`. Proto3 cannot tell "unset" from
// zero, so zero (or a negative number) means "the default" for every number; the booleans are
// `options`' own, since false is a choice as often as it is an omission.
inline v1::MeasureOptions fill_unset(v1::MeasureOptions options, const v1::MeasureOptions& defaults) {
  if (options.number() <= 0) options.set_number(defaults.number());
  if (options.repeat() <= 0) options.set_repeat(defaults.repeat());
  if (options.min_repeat_ms() <= 0) options.set_min_repeat_ms(defaults.min_repeat_ms());
  if (!(options.timeout_s() > 0)) options.set_timeout_s(defaults.timeout_s());
  if (!(options.rtol() > 0)) options.set_rtol(defaults.rtol());
  if (!(options.atol() > 0)) options.set_atol(defaults.atol());
  if (options.input_seed() == 0) options.set_input_seed(defaults.input_seed());
  if (options.rotation_bytes() <= 0) options.set_rotation_bytes(defaults.rotation_bytes());
  return options;
}

// What a measurement request gets for the fields it leaves at zero; the tolerances are explained
// in measure/tolerance.h.
inline v1::MeasureOptions default_measure_options() {
  v1::MeasureOptions defaults;
  defaults.set_repeat(kDefaultRepeat);
  defaults.set_timeout_s(kDefaultTimeoutS);
  defaults.set_rtol(kDefaultRtol);
  defaults.set_atol(kDefaultAtol);
  return defaults;
}

// What a tuning job measures with where its spec says nothing: the request defaults, repeats of
// at least kDefaultTuningMinRepeatMs, and every candidate checked against the reference.
inline v1::MeasureOptions default_tuning_measure_options() {
  v1::MeasureOptions defaults = default_measure_options();
  defaults.set_min_repeat_ms(kDefaultTuningMinRepeatMs);
  defaults.set_check_correctness(true);
  return defaults;
}

// The options a measurement runs with: the defaults where the request left zeros, and number 0
// with min_repeat_ms 0 meaning one run per repeat.
inline v1::MeasureOptions with_defaults(const v1::MeasureOptions& options) {
  v1::MeasureOptions filled = fill_unset(options, default_measure_options());
  if (filled.number() == 0 && filled.min_repeat_ms() == 0) filled.set_number(1);
  return filled;
}

}  // namespace tunefarm
