#include "analyzer/model/frame_folding.h"

#include <algorithm>
#include <string_view>

namespace growtrace {
namespace {

// Interpreter frames kept below the innermost Python frame: enough to show what allocated.
constexpr size_t kMaxAllocatorFrames = 4;

bool is_interpreter_frame(const Frame& f) {
    const std::string module = path_basename(f.module_path);
    return module.starts_with("libpython") || module.starts_with("python3");
}

bool is_cache_wrapper(const Frame& f) { return f.function.find("lru_cache") != std::string::npos; }

}  // namespace

bool is_python_frame(const Frame& f) { return f.module_path == "python"; }

std::vector<Frame> fold_interpreter_frames(const std::vector<Frame>& frames) {
    auto first_python = std::find_if(frames.begin(), frames.end(), is_python_frame);
    if (first_python == frames.end()) return frames;
    std::vector<Frame> out;
    size_t allocator_frames = 0;
    for (auto it = frames.begin(); it != frames.end(); ++it) {
        const Frame& f = *it;
        bool keep = !is_interpreter_frame(f) || is_cache_wrapper(f) ||
                    (it < first_python && allocator_frames++ < kMaxAllocatorFrames);
        if (keep) out.push_back(f);
    }
    return out;
}

}  // namespace growtrace
