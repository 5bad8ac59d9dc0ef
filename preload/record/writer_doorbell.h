// What the recording side (the hooks' threads) tells the writer, which sits above it
// (preload/write/writer.h) and collects from it: the writer connects its handlers when it
// starts, and until then a ring does nothing (no event is recorded before a trace begins).
#pragma once

namespace growtrace::preload {

struct WriterDoorbell {
    void (*wake)();               // many full buffers wait: wake the writer before its tick
    void (*rescan_modules)();     // a stack holds an address in no known module
    void (*main_thread_ended)();  // the writer now watches for the program's last thread
};

void connect_writer(const WriterDoorbell* doorbell);

void ring_writer_wake();
void ring_module_rescan();
void ring_main_thread_ended();

}  // namespace growtrace::preload
