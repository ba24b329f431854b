// How fast this CPU moves a model step's bytes: an elementwise pass (y = a x + b) over 128 KiB in
// and 128 KiB out, both in the L2 cache, vectorized for the widest vectors the CPU has. The steps
// of a built model that are not tuned kernels (row-wise steps, layout conversions, leftover
// epilogues) read what the step before wrote, from the caches, and their speed follows this
// figure from one CPU to another (a Zen 5 core moved them at ~60 GB/s, a Zen 4 one at ~15), not
// a constant: an agent measures it at start and reports it (Capabilities.stream_bytes_per_s), and
// a model job's latency estimate prices its other steps by it (common/wire/wire.h model_latency).
#pragma once

namespace tunefarm {

// Bytes read and written per second, the best of 20 samples of ~2 ms (~50 ms in all).
double measure_stream_bytes_per_s();

}  // namespace tunefarm
