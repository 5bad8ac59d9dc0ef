#include "preload/python/extension.h"

#include "preload/python/agent_api.h"
#include "preload/python/python_allocator.h"
#include "preload/support/extension_points.h"

namespace growtrace::preload::python {
namespace {

// Python objects are traced through the allocator domains unless the run said not to.
void configure(const Config& config) { allow_allocator_hooks(config.python_objects); }

// A forked child's agent announces its caches again.
void reset(SessionOrigin origin) {
    if (origin == SessionOrigin::Forked) forget_caches();
}

void writer_cycle(RecordSink emit) { poll_cache_sizes(emit); }

// The domains can be hooked only once the interpreter runs: the first native allocation made
// under a Python frame installs them (cheap after that: one flag).
void interpreter_frames_seen() { install_allocator_hooks(); }

constexpr ExtensionPoints kPoints = {configure, reset, writer_cycle, interpreter_frames_seen};

}  // namespace

void register_extension() { preload::register_extension(&kPoints); }

}  // namespace growtrace::preload::python
