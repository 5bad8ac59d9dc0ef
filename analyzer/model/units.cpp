#include "analyzer/model/units.h"

#include <cmath>

#include <fmt/format.h>

namespace growtrace {

std::string human_bytes(double b) {
    const char* units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (std::fabs(b) >= 1000 && u < 4) {
        b /= 1000;
        ++u;
    }
    return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

}  // namespace growtrace
