// The points where a part above the trace's core (record/, write/, session/) adds its own
// work without the core depending on it. The CPython seam (preload/python/) is that part: it
// registers its table from the library's constructor (preload/intercept/hooks.cpp), and the
// core calls through extension(). Every point of the default table does nothing, so a build
// or a test without the seam needs no stubs.
#pragma once

#include "format/record_encoder.h"
#include "preload/support/config.h"
#include "preload/support/trace_state.h"

namespace growtrace::preload {

using RecordSink = void (*)(const format::RecordEncoder& record);

struct ExtensionPoints {
    // A preloaded or attached trace begins with this configuration (a forked child keeps its
    // parent's).
    void (*configure)(const Config& config);
    // A new trace replaces the process's previous one (a forked child, a later attach), after
    // the core's parts were reset.
    void (*reset)(SessionOrigin origin);
    // Each writer cycle: records of the extension's own state (the CPython caches' sizes).
    void (*writer_cycle)(RecordSink emit);
    // A native allocation found interpreter frames on its stack (the hot path: keep it cheap).
    void (*interpreter_frames_seen)();
};

// Replaces the table (nullptr: the default one). Called before any trace begins.
void register_extension(const ExtensionPoints* points);

const ExtensionPoints& extension();

}  // namespace growtrace::preload
