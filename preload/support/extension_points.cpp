#include "preload/support/extension_points.h"

#include <atomic>

namespace growtrace::preload {
namespace {

constexpr ExtensionPoints kNone = {
    [](const Config&) {},
    [](SessionOrigin) {},
    [](RecordSink) {},
    [] {},
};

std::atomic<const ExtensionPoints*> g_points{&kNone};

}  // namespace

void register_extension(const ExtensionPoints* points) {
    g_points.store(points ? points : &kNone, std::memory_order_release);
}

const ExtensionPoints& extension() { return *g_points.load(std::memory_order_acquire); }

}  // namespace growtrace::preload
