// A progress line on stderr while a trace is read ("growtrace: reading trace 42% (1.2 GB of
// 2.9 GB)"), shown only when stderr is a terminal and the read takes long enough to notice.
// Redrawn with \r at most 10 times a second; cleared when the file is read (before any report
// is printed) and when the object goes away.
#pragma once

#include <chrono>
#include <cstdint>

#include "analyzer/read/trace_reader.h"

namespace growtrace::cli {

class ReadProgress {
public:
    ReadProgress();
    ~ReadProgress();
    ReadProgress(const ReadProgress&) = delete;
    ReadProgress& operator=(const ReadProgress&) = delete;
    // Removes the line now (before printing an error, say).
    void clear();

private:
    static void on_progress(uint64_t offset, uint64_t file_size, void* self);
    void update(uint64_t offset, uint64_t file_size);

    bool enabled_ = false;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_draw_;
    ReadProgressScope scope_;
};

}  // namespace growtrace::cli
