#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/core.h>

#include "analyzer/report/report_text.h"

namespace growtrace::cli {

namespace {

// Nothing is drawn for reads shorter than this: a small trace would only flicker.
constexpr auto kFirstDrawAfter = std::chrono::milliseconds(300);
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

}  // namespace

ReadProgress::ReadProgress()
    : enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      scope_(enabled_ ? &ReadProgress::on_progress : nullptr, this) {}

ReadProgress::~ReadProgress() { clear(); }

void ReadProgress::on_progress(uint64_t offset, uint64_t file_size, void* self) {
    static_cast<ReadProgress*>(self)->update(offset, file_size);
}

void ReadProgress::update(uint64_t offset, uint64_t file_size) {
    // At the end of the file the line goes: what follows (the report) may go to the same terminal.
    if (offset >= file_size) {
        clear();
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < kFirstDrawAfter) return;
    if (drawn_ && now - last_draw_ < kRedrawEvery) return;
    last_draw_ = now;
    drawn_ = true;
    const double pct = file_size ? 100.0 * static_cast<double>(offset) / static_cast<double>(file_size) : 100.0;
    fmt::print(stderr, "\r\033[Kgrowtrace: reading trace {:3.0f}% ({} of {})", pct, human_bytes(static_cast<double>(offset)),
               human_bytes(static_cast<double>(file_size)));
    std::fflush(stderr);
}

void ReadProgress::clear() {
    if (!drawn_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
}

}  // namespace growtrace::cli
