#include "preload/record/writer_doorbell.h"

#include <atomic>

namespace growtrace::preload {
namespace {

std::atomic<const WriterDoorbell*> g_doorbell{nullptr};

template <class Handler>
void ring(Handler WriterDoorbell::*handler) {
    if (const WriterDoorbell* d = g_doorbell.load(std::memory_order_acquire)) (d->*handler)();
}

}  // namespace

void connect_writer(const WriterDoorbell* doorbell) { g_doorbell.store(doorbell, std::memory_order_release); }

void ring_writer_wake() { ring(&WriterDoorbell::wake); }
void ring_module_rescan() { ring(&WriterDoorbell::rescan_modules); }
void ring_main_thread_ended() { ring(&WriterDoorbell::main_thread_ended); }

}  // namespace growtrace::preload
