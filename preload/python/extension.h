// The CPython seam's place in a trace: what it adds at the core's extension points
// (preload/support/extension_points.h). Registered once, from the library's constructor.
#pragma once

namespace growtrace::preload::python {

void register_extension();

}  // namespace growtrace::preload::python
