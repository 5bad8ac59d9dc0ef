// Units for people: the reports and the classifier's reasons print sizes the same way.
#pragma once

#include <string>

namespace growtrace {

// "1.9 MB", "512 B" (decimal units, as users compare with RSS in top).
std::string human_bytes(double bytes);

}  // namespace growtrace
