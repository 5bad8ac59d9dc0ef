// Symbolizer: resolves a function of this very test binary through the module map that
// dl_iterate_phdr reports, the way the preload library records it.
#include <gtest/gtest.h>
#include <link.h>

#include <cstdint>

#include "analyzer/model/symbolizer.h"

namespace growtrace {

// Not inlined, not in an anonymous namespace: the symbol must exist under this name.
__attribute__((noinline)) int symbolizer_test_target_function(int x) {
    asm volatile("" ::: "memory");
    return x * 3 + 1;
}

namespace {

int collect_main_module(struct dl_phdr_info* info, size_t, void* data) {
    auto* out = static_cast<ModuleRecord*>(data);
    if (!out->path.empty()) return 1;
    out->base = info->dlpi_addr;
    out->path = (info->dlpi_name && info->dlpi_name[0]) ? info->dlpi_name : "/proc/self/exe";
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            out->segments.push_back(Segment{info->dlpi_addr + ph.p_vaddr, ph.p_memsz});
    }
    return 1;  // the first entry is the main program
}

TEST(AnalyzerSymbolizer, ResolvesAFunctionOfThisBinary) {
    ModuleRecord self;
    dl_iterate_phdr(collect_main_module, &self);
    ASSERT_FALSE(self.segments.empty());
    Symbolizer sym;
    sym.add_module(self, 0);
    const uint64_t ip = reinterpret_cast<uintptr_t>(&symbolizer_test_target_function) + 4;
    const Frame& f = sym.symbolize(ip, /*return_address=*/false, 0);
    EXPECT_EQ(f.function, "growtrace::symbolizer_test_target_function(int)");
    EXPECT_NE(f.file.find("analyzer_symbolizer_test.cpp"), std::string::npos) << f.file;
    EXPECT_GT(f.line, 0u);
    EXPECT_EQ(f.module_path, self.path);
    EXPECT_TRUE(sym.take_warnings().empty());
}

TEST(AnalyzerSymbolizer, AddressOutsideEveryModuleIsShownAsHex) {
    Symbolizer sym;
    EXPECT_EQ(sym.symbolize(0x1234, true, 0).function, "0x1234");
}

TEST(AnalyzerSymbolizer, MissingModuleFileWarnsOnceAndIsNotAnError) {
    Symbolizer sym;
    ModuleRecord gone;
    gone.path = "/nonexistent/libgone.so";
    gone.base = 0x7f0000000000;
    gone.segments.push_back(Segment{0x7f0000001000, 0x1000});
    sym.add_module(gone, 0);
    const Frame& a = sym.symbolize(0x7f0000001100, true, 0);
    EXPECT_EQ(a.function, "??");
    EXPECT_EQ(a.module_path, "/nonexistent/libgone.so");
    sym.symbolize(0x7f0000001200, true, 0);
    EXPECT_EQ(sym.take_warnings().size(), 1u);
}

TEST(AnalyzerSymbolizer, PrefersTheModuleOfTheStacksGeneration) {
    // A library dlclose'd (generation 0) and another loaded at the same address (generation 1).
    Symbolizer sym;
    ModuleRecord old_lib, new_lib;
    old_lib.path = "/nonexistent/old.so";
    new_lib.path = "/nonexistent/new.so";
    old_lib.segments.push_back(Segment{0x5000, 0x1000});
    new_lib.segments.push_back(Segment{0x5000, 0x1000});
    sym.add_module(old_lib, 0);
    sym.add_module(new_lib, 1);
    EXPECT_EQ(sym.symbolize(0x5100, true, 0).module_path, "/nonexistent/old.so");
    EXPECT_EQ(sym.symbolize(0x5100, true, 1).module_path, "/nonexistent/new.so");
}

}  // namespace
}  // namespace growtrace
